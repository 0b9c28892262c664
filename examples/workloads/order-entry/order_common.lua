-- order_common.lua: the schema and the three transactions of a small order-entry mix.
-- Required by orders.lua (`require "order_common"`); sysbench finds it beside the script.
local M = {}

M.DISTRICTS = 10
M.CUSTOMERS = 100

local function connect()
  local drv = sysbench.sql.driver()
  return drv, drv:connect()
end

function M.create(warehouses)
  local drv, con = connect()
  con:query([[CREATE TABLE IF NOT EXISTS oe_district (
      w_id INT NOT NULL, d_id INT NOT NULL, next_o_id INT NOT NULL,
      PRIMARY KEY (w_id, d_id))]])
  con:query([[CREATE TABLE IF NOT EXISTS oe_customer (
      w_id INT NOT NULL, c_id INT NOT NULL, balance DECIMAL(12,2) NOT NULL,
      PRIMARY KEY (w_id, c_id))]])
  con:query([[CREATE TABLE IF NOT EXISTS oe_orders (
      o_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, w_id INT NOT NULL,
      d_id INT NOT NULL, c_id INT NOT NULL, amount DECIMAL(12,2) NOT NULL,
      KEY oe_orders_customer (w_id, c_id))]])
  con:query("DELETE FROM oe_district")
  con:query("DELETE FROM oe_customer")
  for w = 1, warehouses do
    for d = 1, M.DISTRICTS do
      con:query(string.format("INSERT INTO oe_district VALUES (%d, %d, 1)", w, d))
    end
    for c = 1, M.CUSTOMERS do
      con:query(string.format("INSERT INTO oe_customer VALUES (%d, %d, 1000.00)", w, c))
    end
  end
  con:disconnect()
end

function M.drop()
  local drv, con = connect()
  for _, t in ipairs({"oe_orders", "oe_customer", "oe_district"}) do
    con:query("DROP TABLE IF EXISTS " .. t)
  end
  con:disconnect()
end

function M.new_order(con, w)
  local d = sysbench.rand.uniform(1, M.DISTRICTS)
  local c = sysbench.rand.uniform(1, M.CUSTOMERS)
  con:query("BEGIN")
  con:query(string.format(
    "UPDATE oe_district SET next_o_id = next_o_id + 1 WHERE w_id = %d AND d_id = %d", w, d))
  con:query(string.format(
    "INSERT INTO oe_orders (w_id, d_id, c_id, amount) VALUES (%d, %d, %d, %d.%02d)",
    w, d, c, sysbench.rand.uniform(1, 500), sysbench.rand.uniform(0, 99)))
  con:query("COMMIT")
end

function M.payment(con, w)
  local c = sysbench.rand.uniform(1, M.CUSTOMERS)
  con:query("BEGIN")
  con:query(string.format(
    "UPDATE oe_customer SET balance = balance - %d WHERE w_id = %d AND c_id = %d",
    sysbench.rand.uniform(1, 50), w, c))
  con:query("COMMIT")
end

function M.order_status(con, w)
  local c = sysbench.rand.uniform(1, M.CUSTOMERS)
  con:query(string.format(
    "SELECT o_id, amount FROM oe_orders WHERE w_id = %d AND c_id = %d ORDER BY o_id DESC LIMIT 1",
    w, c))
end

-- Percent of new orders and payments per mix; the rest are order-status reads.
M.MIXES = {
  standard = {new_order = 45, payment = 43},
  reads = {new_order = 10, payment = 10},
}

return M
