"""What both command lines and both pages share, apart from wire, transport and model: the
console kit (`console`), Ctrl-C held while a command line loads (`interrupts`), the
request log (`request_log`), homes (`home`), settings files (`tomlfile`) and the loopback
web guard and server (`web`)."""
