"""Peer-routed search: onion packets, relay and exit services, backends."""
