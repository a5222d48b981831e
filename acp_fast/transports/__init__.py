"""Byte transports a peer runs over: stdio now; the event-loop choice every transport shares."""
