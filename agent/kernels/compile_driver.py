# Writes driver.pyc.bin: driver.py compiled by this python, for kernels of
# the same python to load instead of compiling the source at every start.
# Run by `go generate ./agent/kernels` (with the python the default image
# has, bookworm's 3.11) after any change to driver.py; a test fails while
# the file was made from another driver.py.
#
# Format: one ASCII header line, "sandlot-driver <cache_tag> <sha256 of
# driver.py>", then the marshalled code object (filename "<string>", as
# python names a -c program).
import hashlib
import marshal
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "driver.py"), "rb") as f:
    source = f.read()
code = compile(source, "<string>", "exec", dont_inherit=True, optimize=0)
header = "sandlot-driver %s %s\n" % (sys.implementation.cache_tag, hashlib.sha256(source).hexdigest())
with open(os.path.join(here, "driver.pyc.bin"), "wb") as f:
    f.write(header.encode("ascii") + marshal.dumps(code))
