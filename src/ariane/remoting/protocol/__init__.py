"""The sans-IO half of remoting: the command model, codes, codec, headers and bodies."""
