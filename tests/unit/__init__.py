"""Tests of one layer at a time, in process: no gateway, no engine emulator, no Docker."""
