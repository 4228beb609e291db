"""The official E2B Python SDKs (e2b, e2b_code_interpreter) against sandlot.

Run by python_test.go with E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL
pointing at a `sandlot serve`, and nothing else: every call below is the
SDK's own, as a program written for E2B makes it. The cases are what the
specifications sandlot implements use of the SDK: AsyncSandbox with
streaming commands and files, a worker driven over stdin and stdout
(JSON lines, spec 002), reuse of a sandbox by id with a health check and a
timeout refresh (spec 004), and run_code.
"""

import asyncio
import json
import logging
import os
import unittest

import e2b
from e2b import AsyncSandbox, CommandExitException, Sandbox
from e2b_code_interpreter import AsyncSandbox as AsyncCodeSandbox
from e2b_code_interpreter import Sandbox as CodeSandbox

# Bounds: a command or a cell that does not finish in time fails its test.
TIMEOUT = 120

# IsolatedAsyncioTestCase runs its loop in debug mode, which logs every
# callback slower than 0.1 s: noise on a loaded machine.
logging.getLogger("asyncio").setLevel(logging.ERROR)


class SyncSandbox(unittest.TestCase):
    def setUp(self):
        self.sbx = Sandbox.create(timeout=TIMEOUT, metadata={"suite": "python"}, envs={"FROM_CREATE": "c"})
        self.addCleanup(self.sbx.kill)

    def test_create_info_kill(self):
        self.assertTrue(self.sbx.is_running())
        info = self.sbx.get_info()
        self.assertEqual(info.sandbox_id, self.sbx.sandbox_id)
        self.assertEqual(info.metadata.get("suite"), "python")
        ids = [s.sandbox_id for s in Sandbox.list(query=e2b.SandboxQuery(metadata={"suite": "python"})).next_items()]
        self.assertIn(self.sbx.sandbox_id, ids)
        other = Sandbox.create(timeout=TIMEOUT)
        self.assertTrue(other.kill())
        self.assertFalse(Sandbox.kill(other.sandbox_id))
        self.assertFalse(other.is_running())

    def test_commands_streaming(self):
        out, err = [], []
        r = self.sbx.commands.run(
            'echo one; echo warn >&2; echo "$SECRET_KEY-$FROM_CREATE"; pwd',
            envs={"SECRET_KEY": "s3"},
            cwd="/tmp",
            on_stdout=out.append,
            on_stderr=err.append,
            timeout=TIMEOUT,
        )
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(r.stdout, "one\ns3-c\n/tmp\n")
        self.assertEqual("".join(out), r.stdout)
        self.assertEqual("".join(err), "warn\n")

    def test_nonzero_exit(self):
        with self.assertRaises(CommandExitException) as cm:
            self.sbx.commands.run("echo bad >&2; exit 3", timeout=TIMEOUT)
        self.assertEqual(cm.exception.exit_code, 3)
        self.assertEqual(cm.exception.stderr, "bad\n")

    def test_background_command(self):
        h = self.sbx.commands.run("sleep 1; echo bg", background=True, timeout=TIMEOUT)
        self.assertIn(h.pid, [p.pid for p in self.sbx.commands.list()])
        r = h.wait()
        self.assertEqual((r.exit_code, r.stdout), (0, "bg\n"))
        k = self.sbx.commands.run("sleep 600", background=True, timeout=0)
        self.assertTrue(self.sbx.commands.kill(k.pid))
        with self.assertRaises(CommandExitException):
            k.wait()

    def test_files(self):
        info = self.sbx.files.write("/home/user/dir/a.txt", "hello")
        self.assertEqual(info.path, "/home/user/dir/a.txt")
        self.sbx.files.write("/home/user/dir/b.bin", b"\x00\x01\xff")
        self.assertEqual(self.sbx.files.read("/home/user/dir/a.txt"), "hello")
        self.assertEqual(bytes(self.sbx.files.read("/home/user/dir/b.bin", format="bytes")), b"\x00\x01\xff")
        self.assertEqual(b"".join(self.sbx.files.read("/home/user/dir/a.txt", format="stream")), b"hello")
        self.assertEqual(sorted(e.name for e in self.sbx.files.list("/home/user/dir")), ["a.txt", "b.bin"])
        self.assertTrue(self.sbx.files.exists("/home/user/dir/a.txt"))
        self.sbx.files.remove("/home/user/dir/a.txt")
        self.assertFalse(self.sbx.files.exists("/home/user/dir/a.txt"))
        with self.assertRaises(e2b.NotFoundException):
            self.sbx.files.read("/home/user/dir/a.txt")

    def test_reuse_by_id(self):
        # Spec 004: a session keeps its sandbox; the next request connects
        # by id, checks it with echo and refreshes its timeout.
        self.sbx.files.write("/home/user/state.txt", "kept")
        again = Sandbox.connect(self.sbx.sandbox_id)
        self.assertEqual(again.commands.run("echo ok").stdout, "ok\n")
        again.set_timeout(TIMEOUT * 2)
        self.assertEqual(again.files.read("/home/user/state.txt"), "kept")


class Network(unittest.TestCase):
    """The SDK asks for the internet on every create (allow_internet_access
    True, its default): the daemon gives what its operator allows,
    SANDLOT_INTERNET says which ("open", or "none" on a daemon with default
    settings), and get_info says so."""

    def test_default_create(self):
        sbx = Sandbox.create(timeout=TIMEOUT)
        self.addCleanup(sbx.kill)
        info = sbx.get_info()
        self.assertEqual(info.allow_internet_access, os.environ["SANDLOT_INTERNET"] == "open")
        if os.environ["SANDLOT_INTERNET"] == "none":
            r = sbx.commands.run("curl -sS -m 10 http://example.com/ 2>&1; echo exit $?; cat /etc/resolv.conf")
            self.assertIn("Could not resolve host: example.com", r.stdout)
            self.assertNotIn("exit 0", r.stdout)
            self.assertIn("This sandbox has no network", r.stdout)


class AsyncSandboxes(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.sbx = await AsyncSandbox.create(timeout=TIMEOUT, envs={"MYSQL_PASSWORD": "pw"})

    async def asyncTearDown(self):
        await self.sbx.kill()

    async def test_create_kill(self):
        self.assertTrue(await self.sbx.is_running())
        other = await AsyncSandbox.create(timeout=TIMEOUT)
        self.assertTrue(await other.kill())
        self.assertFalse(await AsyncSandbox.kill(other.sandbox_id))

    async def test_streaming_is_live(self):
        # The command waits for a file the test writes only once the
        # command's first line reached on_stdout: without live streaming it
        # would wait until its timeout.
        seen = asyncio.Event()
        lines = []

        def on_stdout(data):
            lines.append(data)
            if "ready" in data:
                seen.set()

        h = await self.sbx.commands.run(
            "echo ready; for i in $(seq 600); do [ -f /tmp/go ] && break; sleep 0.1; done; cat /tmp/go",
            background=True,
            on_stdout=on_stdout,
            on_stderr=lambda d: None,
            timeout=TIMEOUT,
        )
        await asyncio.wait_for(seen.wait(), 60)
        await self.sbx.files.write("/tmp/go", "went")
        r = await h.wait()
        self.assertEqual(r.stdout, "ready\nwent")
        self.assertEqual("".join(lines), "ready\nwent")

    async def test_json_rpc_worker(self):
        # Spec 002: a worker in the sandbox reads commands as JSON lines on
        # stdin and streams events and results as JSON lines on stdout; the
        # secret reaches it through envs.
        worker = (
            "import json, os, sys\n"
            "for line in sys.stdin:\n"
            "    cmd = json.loads(line)\n"
            "    if cmd['cmd'] == 'cleanup':\n"
            "        print(json.dumps({'status': 'bye'}), flush=True)\n"
            "        break\n"
            "    print(json.dumps({'type': 'event', 'name': 'step_start', 'data': {'step': cmd['step_id']}}), flush=True)\n"
            "    print(json.dumps({'status': 'complete', 'step_id': cmd['step_id'], 'rows': 42,\n"
            "                      'secret_len': len(os.environ['MYSQL_PASSWORD'])}), flush=True)\n"
        )
        await self.sbx.files.write("/home/user/worker.py", worker)
        messages = []
        got = asyncio.Condition()
        buf = [""]

        async def deliver(data):
            buf[0] += data
            while "\n" in buf[0]:
                line, buf[0] = buf[0].split("\n", 1)
                async with got:
                    messages.append(json.loads(line))
                    got.notify_all()

        h = await self.sbx.commands.run(
            "python3 /home/user/worker.py",
            background=True,
            stdin=True,
            on_stdout=lambda d: asyncio.ensure_future(deliver(d)),
            timeout=TIMEOUT,
        )

        async def wait_for(n):
            async with got:
                await asyncio.wait_for(got.wait_for(lambda: len(messages) >= n), 60)

        for i, step in enumerate(["extract", "load"]):
            await self.sbx.commands.send_stdin(h.pid, json.dumps({"cmd": "exec_step", "step_id": step}) + "\n")
            await wait_for(2 * (i + 1))
        await self.sbx.commands.send_stdin(h.pid, json.dumps({"cmd": "cleanup"}) + "\n")
        r = await h.wait()
        await wait_for(5)
        self.assertEqual(r.exit_code, 0)
        self.assertEqual([m.get("status") or m.get("name") for m in messages], ["step_start", "complete", "step_start", "complete", "bye"])
        self.assertEqual(messages[1], {"status": "complete", "step_id": "extract", "rows": 42, "secret_len": 2})

    async def test_files(self):
        await self.sbx.files.write("/home/user/session/run_1/events.jsonl", '{"a":1}\n')
        self.assertEqual(await self.sbx.files.read("/home/user/session/run_1/events.jsonl"), '{"a":1}\n')
        chunks = [c async for c in await self.sbx.files.read("/home/user/session/run_1/events.jsonl", format="stream")]
        self.assertEqual(b"".join(chunks), b'{"a":1}\n')
        entries = await self.sbx.files.list("/home/user/session")
        self.assertEqual([e.name for e in entries], ["run_1"])


class CodeInterpreter(unittest.TestCase):
    def setUp(self):
        self.sbx = CodeSandbox.create(timeout=TIMEOUT)
        self.addCleanup(self.sbx.kill)

    def test_state_kept(self):
        self.sbx.run_code("x = 20")
        e = self.sbx.run_code("print('hi')\nx * 2 + 2")
        self.assertEqual(e.text, "42")
        self.assertEqual(e.logs.stdout, ["hi\n"])
        self.assertIsNone(e.error)

    def test_error(self):
        e = self.sbx.run_code("print('before')\n1/0")
        self.assertEqual(e.error.name, "ZeroDivisionError")
        self.assertEqual(e.error.value, "division by zero")
        self.assertIn("ZeroDivisionError", e.error.traceback)
        self.assertEqual(e.logs.stdout, ["before\n"])
        b = self.sbx.run_code("echo out; false", language="bash")
        self.assertEqual(b.logs.stdout, ["out\n"])
        self.assertEqual((b.error.name, b.error.value), ("", "1"))  # E2B's bash kernel: the status

    def test_chart_and_results(self):
        out = []
        e = self.sbx.run_code(
            "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [1, 4, 9], label='squares')\n"
            "plt.title('growth')\n"
            "plt.show()\n"
            "print('drawn')",
            on_stdout=lambda m: out.append(m.line),
        )
        self.assertIsNone(e.error)
        self.assertEqual(out, ["drawn\n"])
        pngs = [r for r in e.results if r.png]
        self.assertEqual(len(pngs), 1)
        self.assertEqual(pngs[0].chart.type.value, "line")
        self.assertEqual(pngs[0].chart.title, "growth")

    def test_contexts_and_javascript(self):
        ctx = self.sbx.create_code_context(language="python", cwd="/tmp")
        self.sbx.run_code("y = 'in context'", context=ctx)
        self.assertEqual(self.sbx.run_code("y", context=ctx).text, "in context")
        self.assertIsNotNone(self.sbx.run_code("y").error)  # the default context is another kernel
        js = self.sbx.run_code("const z = 6; z * 7", language="javascript")
        self.assertEqual(js.text, "42")


class AsyncCodeInterpreter(unittest.IsolatedAsyncioTestCase):
    async def test_run_code(self):
        sbx = await AsyncCodeSandbox.create(timeout=TIMEOUT)
        try:
            await sbx.run_code("import os\nn = len(os.listdir('/home/user'))")
            e = await sbx.run_code("n >= 0")
            self.assertEqual(e.text, "True")
            lines = []
            e = await sbx.run_code("for i in range(3): print(i)", on_stdout=lambda m: lines.append(m.line))
            self.assertEqual("".join(lines), "0\n1\n2\n")
        finally:
            await sbx.kill()


if __name__ == "__main__":
    unittest.main()
