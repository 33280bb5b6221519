"""Where a request enters: sockets, framing, connection limits, and dispatch to a handler.

``socket_server`` accepts connections (limits, backoff on EMFILE), ``connection`` reads frames
into memory from ``memory_pool`` and writes responses in order, ``dispatcher`` decodes the header
and routes to the handler table, and ``context`` is what a handler is given for one request.
"""
