"""The engine the nodes and protocols run on: private, imported by ``graph``, ``nodes/`` and
``protocols/`` only. Nothing here is public API; names and modules may change in any release."""
