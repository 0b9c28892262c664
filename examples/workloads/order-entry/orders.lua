-- orders.lua: a small order-entry mix for sysbench 1.0.20 (docs/workloads.md).
--   sysbench orders.lua --warehouses=2 --mix=standard prepare|run|cleanup
local oe = require "order_common"

sysbench.cmdline.options = {
  warehouses = {"Number of warehouses", 1},
  mix = {"Transaction mix: standard (45% new order, 43% payment) or reads", "standard"},
}

local function prepare()
  oe.create(sysbench.opt.warehouses)
end

local function cleanup()
  oe.drop()
end

sysbench.cmdline.commands = {
  prepare = {prepare},
  cleanup = {cleanup},
}

function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
  mix = oe.MIXES[sysbench.opt.mix]
  if mix == nil then
    error("unknown --mix=" .. sysbench.opt.mix .. " (standard or reads)")
  end
end

function thread_done()
  con:disconnect()
end

function event()
  local w = sysbench.rand.uniform(1, sysbench.opt.warehouses)
  local p = sysbench.rand.uniform(1, 100)
  if p <= mix.new_order then
    oe.new_order(con, w)
  elseif p <= mix.new_order + mix.payment then
    oe.payment(con, w)
  else
    oe.order_status(con, w)
  end
end
