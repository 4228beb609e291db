# Writes driver.pyc.bin: the driver's program (driver_site.py,
# driver_hooks.py and driver.py, joined as pythonSource joins them)
# compiled by this python, for kernels of the same python to load instead of compiling the source at every start.
# Run by `go generate ./agent/kernels` (with the python the default image
# has, bookworm's 3.11) after any change to those files; a test fails while
# the file was made from another program.
#
# Format: one ASCII header line, "sandlot-driver <cache_tag> <sha256 of
# the program>", then the marshalled code object (filename "<string>", as
# python names a -c program).
import hashlib
import marshal
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
parts = []
for name in ("driver_site.py", "driver_hooks.py", "driver.py"):
    with open(os.path.join(here, name), "rb") as f:
        parts.append(f.read())
source = b"\n".join(parts)
code = compile(source, "<string>", "exec", dont_inherit=True, optimize=0)
header = "sandlot-driver %s %s\n" % (sys.implementation.cache_tag, hashlib.sha256(source).hexdigest())
with open(os.path.join(here, "driver.pyc.bin"), "wb") as f:
    f.write(header.encode("ascii") + marshal.dumps(code))
