"""Tests of environment/custom_tools_scan.py with the host interpreter: run as
`python3 test_custom_tools_scan.py PATH/TO/custom_tools_scan.py`."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = None


def scan(folder, env=None, args=True):
    cmd = [sys.executable, "-I", SCRIPT] + ([folder] if args else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(out)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))


class ScanTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def by_name(self, result):
        return {(t["module"], t["function"]): t for t in result["tools"]}

    def test_public_documented_functions_are_listed_with_schemas(self):
        write(os.path.join(self.root, "textutils.py"), '''
            from typing import Optional, List
            def shout(text: str, times: int = 1, sep: Optional[str] = None) -> str:
                """Upper-case text, repeated."""
                return sep.join([text.upper()] * times)
            def stats(values: List[float], *, precise: bool = False, meta: dict = None):
                """Mean and spread."""
            def nodoc(x: int):
                return x
            def _hidden(x: int):
                """Private."""
            async def fetch(url: str | None, n: "int" = 3) -> bytes:
                """Async is listed too."""
            class K:
                def method(self):
                    """Methods are not module functions."""
        ''')
        tools = self.by_name(scan(self.root))
        self.assertEqual(sorted(tools), [("textutils", "fetch"), ("textutils", "shout"),
                                         ("textutils", "stats")])
        shout = tools[("textutils", "shout")]
        self.assertEqual(shout["signature"],
                         "shout(text: str, times: int=1, sep: Optional[str]=None) -> str")
        self.assertEqual(shout["docstring"], "Upper-case text, repeated.")
        self.assertEqual(shout["inputSchema"], {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "times": {"type": "integer", "default": 1},
                "sep": {"type": ["string", "null"], "default": None},
            },
            "required": ["text"],
        })
        stats = tools[("textutils", "stats")]["inputSchema"]
        self.assertEqual(stats["properties"]["values"], {"type": "array",
                                                         "items": {"type": "number"}})
        self.assertEqual(stats["properties"]["precise"], {"type": "boolean", "default": False})
        self.assertEqual(stats["required"], ["values"])
        fetch = tools[("textutils", "fetch")]["inputSchema"]
        self.assertEqual(fetch["properties"]["url"], {"type": ["string", "null"]})
        self.assertEqual(fetch["properties"]["n"], {"type": "integer", "default": 3})

    def test_packages_list_init_and_public_submodules(self):
        write(os.path.join(self.root, "kit", "__init__.py"), '''
            def top():
                """In the package."""
        ''')
        write(os.path.join(self.root, "kit", "geo.py"), '''
            def area(w: float, h: float) -> float:
                """Area."""
        ''')
        write(os.path.join(self.root, "kit", "_impl.py"), '''
            def secret():
                """Private module."""
        ''')
        tools = self.by_name(scan(self.root))
        self.assertEqual(sorted(tools), [("kit", "top"), ("kit.geo", "area")])

    def test_a_file_that_does_not_parse_is_named_and_the_others_still_listed(self):
        write(os.path.join(self.root, "broken.py"), "def ok():\n    '''x'''\n\ndef bad(:\n")
        write(os.path.join(self.root, "good.py"), '''
            def fine():
                """Fine."""
        ''')
        result = scan(self.root)
        self.assertEqual([(t["module"], t["function"]) for t in result["tools"]],
                         [("good", "fine")])
        self.assertEqual(len(result["errors"]), 1)
        err = result["errors"][0]
        self.assertEqual(err["module"], "broken")
        self.assertTrue(err["file"].endswith("broken.py"))
        self.assertEqual(err["line"], 4)
        self.assertIn("SyntaxError", err["error"])

    def test_nothing_is_executed(self):
        marker = os.path.join(self.root, "ran")
        write(os.path.join(self.root, "evil.py"), '''
            open(%r, "w").write("x")
            def f():
                """Doc."""
        ''' % marker)
        self.assertEqual(len(scan(self.root)["tools"]), 1)
        self.assertFalse(os.path.exists(marker))

    def test_without_arguments_it_reads_the_first_pythonpath_entry(self):
        write(os.path.join(self.root, "h.py"), '''
            def g():
                """G."""
        ''')
        env = dict(os.environ, PYTHONPATH=self.root + os.pathsep + "/nonexistent")
        # -I ignores PYTHONPATH for imports but the script reads the variable itself
        result = scan(self.root, env=env, args=False)
        self.assertEqual([t["function"] for t in result["tools"]], ["g"])


if __name__ == "__main__":
    SCRIPT = sys.argv.pop(1)
    unittest.main()
