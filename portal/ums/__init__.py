"""The Universal Message Service (UMS): OpenMQ's HTTP messaging gateway.

Any HTTP client sends and receives messages through ``/<context-root>/simple`` (query
string + text body) and ``/<context-root>/xml`` (SOAP 1.1, attachments as
multipart/related); ``GET /<context-root>/simple?service=...`` answers getBrokerInfo,
getConfiguration, debug and ping.  Modules: :mod:`.config` (settings), :mod:`.sessions`
(sids, pooled broker connections, the sweeper), :mod:`.services` (the actions every view
calls), :mod:`.soap` (envelopes in and out), :mod:`.transformer` (a SOAP message in a
BytesMessage, in OpenMQ's MessageTransformer layout), :mod:`.views`.
"""
