"""The controller process: kopf handlers (the only kopf importer), the Driver, the wiring."""
