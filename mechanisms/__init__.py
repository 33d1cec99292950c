"""Mechanisms: one file per construction; a new counterexample is a new file here."""

from advsim.mechanisms.linear import LinearProcess

__all__ = ["LinearProcess"]
