"""The Files and Containers APIs, and the files of code_interpreter containers."""
