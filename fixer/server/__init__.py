"""`graphfix server`: a language server on stdin/stdout, with the standard library only.

session.py and jsonrpc.py speak JSON-RPC and the LSP lifecycle, documents.py holds the editor's
text and positions, protocol.py serves graphfix's features; buffer.py runs the engine on an
editor's text and settings.py decides the options per file (both loaded after ``initialize``).
The server never writes files and never runs the code it checks."""
