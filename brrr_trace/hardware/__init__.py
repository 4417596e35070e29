"""The GPUs brrr-trace knows: their datasheet peaks and how a trace's device is recognised.

Pure data and matching, shared by the analyzers and the diff; nothing here reads a trace.
"""
