"""What both command lines and both pages share, apart from wire, transport and model: the
console kit (`console`), homes (`home`), settings files (`tomlfile`) and the loopback web
guard and server (`web`)."""
