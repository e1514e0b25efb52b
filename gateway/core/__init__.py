"""What every API package (responses/, chat/, conversations/, files/) shares: ids, the tenant and services
of a request, the services themselves, and the conversations' store.

The packages stand in one order, each importing only those below it: core, then files, then responses
(the run loop, which uses files and conversations), then conversations' and chat's routes. Nothing here
imports a package above it at run time.
"""
