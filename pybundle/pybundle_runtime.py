"""Runtime of the generated `tools` package: calls registry tools through the bridge.

The host passes one connected AF_UNIX stream socket whose descriptor number is in the
environment variable PTC_BRIDGE_FD. Requests and answers are JSON objects, one per line
(docs/bridge.md). Calls may be made from many threads at once: every request has its own id,
writes are serialised by a lock, and one reader thread hands each answer to its waiter.
"""
import _thread
import os as _os

# `import tools` must stay cheap (a run pays it before its first line): asyncio (about 90 ms),
# json, socket and threading are imported where they are first needed, by the first call.

__all__ = ['ToolError', 'call', 'acall', 'search', 'asearch', 'emit', 'aemit', 'help']

_ANSWER_MAX = 64 << 20  # bytes of one answer line; the host caps what it sends far lower
_NO_BRIDGE = ('tool calls are not available in this run (PTC_BRIDGE_FD is not set): '
              'run the code through ptc-mcp execute_code with downstream tools configured')


class ToolError(Exception):
    """A tool call that failed: the tool reported an error, or the bridge refused or lost it.

    `code` is the bridge's error code ('denied', 'timeout', ...) or 'tool_error' when the tool
    itself answered with isError; `server` and `tool` name the call when there was one.
    """

    def __init__(self, message, code='error', server=None, tool=None):
        super().__init__(message)
        self.code = code
        self.server = server
        self.tool = tool


class _Bridge:
    def __init__(self, fd):
        import itertools
        import socket
        import threading

        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=fd)
        # Blocking whatever flags the host left on the descriptor, and not passed on to
        # programs the code starts: the bridge belongs to this interpreter only.
        self._sock.setblocking(True)
        self._sock.set_inheritable(False)
        self._wlock = threading.Lock()
        self._plock = threading.Lock()
        self._pending = {}
        self._ids = itertools.count(1)
        self._dead = None
        self._reader = threading.Thread(target=self._read_loop, name='ptc-bridge', daemon=True)
        self._reader.start()

    def _read_loop(self):
        import json

        reason = 'the bridge was closed by the host'
        try:
            f = self._sock.makefile('rb')
            while True:
                line = f.readline(_ANSWER_MAX + 1)
                if not line:
                    break
                if len(line) > _ANSWER_MAX:
                    reason = 'the bridge sent an answer over %d bytes' % _ANSWER_MAX
                    break
                try:
                    msg = json.loads(line)
                    rid = msg['id']
                except (ValueError, KeyError, TypeError):
                    reason = 'the bridge sent a malformed answer'
                    break
                with self._plock:
                    slot = self._pending.pop(rid, None)
                if slot is not None:
                    slot[1] = msg
                    slot[0].set()
        except OSError as e:
            reason = 'the bridge failed: %s' % e
        with self._plock:
            self._dead = reason
            pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot[0].set()

    def request(self, method, params):
        import json
        import threading

        slot = [threading.Event(), None]
        with self._plock:
            if self._dead is not None:
                raise ToolError(self._dead, 'unavailable')
            rid = next(self._ids)
            self._pending[rid] = slot
        try:
            line = (json.dumps({'id': rid, 'method': method, 'params': params},
                                ensure_ascii=False, allow_nan=False) + '\n').encode('utf-8')
        except (TypeError, ValueError, UnicodeError) as e:
            with self._plock:
                self._pending.pop(rid, None)
            raise ToolError('the arguments cannot be sent as JSON: %s' % e, 'invalid_request')
        try:
            with self._wlock:
                self._sock.sendall(line)
        except OSError as e:
            with self._plock:
                self._pending.pop(rid, None)
            raise ToolError('the bridge failed: %s' % e, 'unavailable')
        slot[0].wait()
        msg = slot[1]
        if msg is None:
            raise ToolError(self._dead or 'the bridge was closed', 'unavailable')
        err = msg.get('error')
        if err is not None:
            if isinstance(err, dict):
                raise ToolError(str(err.get('message') or 'the host refused the request'),
                                str(err.get('code') or 'error'))
            raise ToolError(str(err))
        return msg.get('result')


_state_lock = _thread.allocate_lock()
_bridge_obj = None


def _bridge():
    global _bridge_obj
    with _state_lock:
        if _bridge_obj is None:
            fd = _os.environ.get('PTC_BRIDGE_FD')
            if not fd:
                raise ToolError(_NO_BRIDGE, 'unavailable')
            try:
                _bridge_obj = _Bridge(int(fd))
            except (ValueError, OSError) as e:
                raise ToolError('the bridge descriptor PTC_BRIDGE_FD=%r cannot be used: %s'
                                % (fd, e), 'unavailable')
        return _bridge_obj


def _text_of(result):
    parts = []
    for item in result.get('content') or []:
        if isinstance(item, dict) and item.get('type') == 'text' and isinstance(item.get('text'), str):
            parts.append(item['text'])
    return '\n'.join(parts) if parts else None


def _unwrap(result, server, tool):
    if not isinstance(result, dict):
        return result
    if result.get('isError'):
        raise ToolError(_text_of(result) or 'the tool %s/%s failed without a message' % (server, tool),
                        'tool_error', server, tool)
    if result.get('structuredContent') is not None:
        return result['structuredContent']
    text = _text_of(result)
    if text is None:
        return result.get('content')
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def call(server, tool, **args):
    """Calls a tool by its original server and tool names; returns its structuredContent,
    else the parsed JSON of its text, else the text. Raises ToolError on failure."""
    return _invoke(server, tool, args, {})


def _invoke(server, tool, required, optional):
    args = dict(required)
    for k, v in optional.items():
        if v is not None:
            args[k] = v
    try:
        result = _bridge().request('call', {'server': server, 'tool': tool, 'arguments': args})
    except ToolError as e:
        if e.server is None:
            e.server, e.tool = server, tool
        raise
    return _unwrap(result, server, tool)


_catalog_cache = []


def _signatures():
    if not _catalog_cache:
        import json

        try:
            with open(_os.path.join(_os.path.dirname(__file__), '_catalog.json'),
                      encoding='utf-8') as f:
                _catalog_cache.append(json.load(f))
        except (OSError, ValueError):
            _catalog_cache.append({'modules': {}})
    return _catalog_cache[0]


def search(query, top_k=5, server=None, category=None):
    """Searches the tool registry; returns a list of tools (id, server, name, description,
    inputSchema, score, category, and `python`: the function to call them by, when there is
    one). server / category: only tools of that server / category, as search_tools takes."""
    params = {'query': str(query), 'top_k': int(top_k)}
    if server is not None:
        params['server'] = str(server)
    if category is not None:
        params['category'] = str(category)
    result = _bridge().request('search', params)
    tools = result.get('tools') if isinstance(result, dict) else result
    if not isinstance(tools, list):
        return []
    by_wire = {}
    for mod, info in _signatures().get('modules', {}).items():
        for fn in info.get('functions', []):
            by_wire[(info.get('server'), fn.get('tool'))] = 'tools.%s.%s' % (mod, fn.get('signature'))
    for t in tools:
        if isinstance(t, dict):
            sig = by_wire.get((t.get('server'), t.get('name')))
            if sig:
                t['python'] = sig
    return tools


def emit(obj):
    """Sends one JSON record to the caller; it comes back in execute_code's `outputs`."""
    _bridge().request('emit', {'record': obj})


async def acall(server, tool, **args):
    """call() for asyncio code: runs the blocking call on the default executor."""
    import asyncio

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: call(server, tool, **args))


async def asearch(query, top_k=5, server=None, category=None):
    import asyncio

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: search(query, top_k, server, category))


async def aemit(obj):
    import asyncio

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, emit, obj)


def help(module=None):
    """Prints the server modules, or the functions of one module."""
    cat = _signatures().get('modules', {})
    if module is None:
        print('Server modules (from tools.<module> import <function>; tools.help("<module>")):')
        for mod, info in sorted(cat.items()):
            print('  tools.%s  server %r, %d tools' % (mod, info.get('server'), len(info.get('functions', []))))
        print('Also: tools.call(server, tool, **args), '
              'tools.search(query, top_k=5, server=None, category=None), tools.emit(obj)')
        return
    info = cat.get(getattr(module, '__name__', module).rsplit('.', 1)[-1])
    if info is None:
        print('no module %r; tools.help() lists them' % (module,))
        return
    for fn in info.get('functions', []):
        print('tools.%s.%s' % (getattr(module, '__name__', module).rsplit('.', 1)[-1], fn.get('signature')))
        if fn.get('summary'):
            print('    ' + fn['summary'])
