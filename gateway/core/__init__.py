"""What every API package (responses/, chat/, conversations/, files/) shares: ids, the strict base of
request models, what a route reads of a request (its tenant, the app's services, `include` queries).

The packages stand in one order, each importing only those below it: core, then files, then responses
(the run loop, which uses files and conversations), then conversations' and chat's routes. Nothing here
imports a package above it, at run time or for the type checker. The app's services are made above them
all (gateway/services.py); each package names what it uses of them in its own `needs.py`.
"""
