"""Channels a page script could open past the allow-list without an HTTP request the
context's route sees: WebSockets from workers, WebRTC (STUN over UDP, TURN over TCP) and
WebTransport. Each test listens on a local port that is on no allow-list, has a page try the
channel, and counts the bytes that arrive there: every count must be zero."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from webagent_r1.browser import Browser, BrowserSession

pytestmark = pytest.mark.browser

_WAIT_S = 2.5
"""How long a page script tries its channel; a packet it sends arrives within milliseconds."""


class _Listener:
    """A TCP or UDP socket on a free local port that counts every byte sent to it."""

    def __init__(self, kind: int, port: int = 0) -> None:
        if kind == socket.SOCK_STREAM:
            self.sock = socket.create_server(("127.0.0.1", port))
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.bind(("127.0.0.1", port))
        self.port: int = self.sock.getsockname()[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.bytes = 0
        self.connections = 0
        self.first: bytes = b""
        self._lock = threading.Lock()
        target = self._accept if kind == socket.SOCK_STREAM else self._datagrams
        threading.Thread(target=target, daemon=True).start()

    def _count(self, data: bytes) -> None:
        with self._lock:
            if not self.first:
                self.first = data
            self.bytes += len(data)

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                self.connections += 1
                threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        conn.settimeout(_WAIT_S * 2)
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(65536):
                self._count(data)

    def _datagrams(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self._count(self.sock.recv(65536))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def tcp() -> Iterator[_Listener]:
    listener = _Listener(socket.SOCK_STREAM)
    yield listener
    listener.close()


@pytest.fixture
def udp() -> Iterator[_Listener]:
    listener = _Listener(socket.SOCK_DGRAM)
    yield listener
    listener.close()


@pytest.fixture
async def page_session(browser: Browser, site: str) -> AsyncIterator[BrowserSession]:
    """A session allowed to load ``site`` only, on its index page."""
    await browser.ensure_alive()
    s = await browser.new_session([site])
    assert await s.goto(f"{site}/index.html") is None
    yield s
    await s.close()


async def _settle(listener: _Listener) -> None:
    """Give a packet in flight time to land before the count is read."""
    await asyncio.sleep(0.3)


# A WebSocket opened inside a worker: the worker's source comes from a blob, so no HTTP
# request of the context ever names it. ``kind`` is Worker or SharedWorker.
_WORKER_SOCKET_JS = """([kind, url, wait]) => new Promise((resolve) => {
  const body = `
    const say = (m) => (typeof postMessage === 'function' && !self.onconnect)
      ? postMessage(m) : self.port && self.port.postMessage(m);
    const open = (m) => {
      let ws;
      try { ws = new WebSocket(${JSON.stringify(url)}); } catch (e) { return m('throws'); }
      ws.onopen = () => m('open');
      ws.onerror = () => m('error');
      ws.onclose = () => m('closed');
    };
    if ('onconnect' in self) {
      self.onconnect = (e) => { const p = e.ports[0]; open((m) => p.postMessage(m)); };
    } else {
      open((m) => postMessage(m));
    }`;
  const src = URL.createObjectURL(new Blob([body], {type: 'text/javascript'}));
  setTimeout(() => resolve('pending'), wait);
  try {
    if (kind === 'SharedWorker') {
      const w = new SharedWorker(src);
      w.port.onmessage = (e) => resolve(e.data);
      w.port.start();
    } else {
      const w = new Worker(src);
      w.onmessage = (e) => resolve(e.data);
      w.onerror = () => resolve('worker error');
    }
  } catch (e) { resolve('no ' + kind); }
})"""


@pytest.mark.parametrize("kind", ["Worker", "SharedWorker"])
async def test_worker_websocket_sends_nothing_off_the_list(
    page_session: BrowserSession, tcp: _Listener, kind: str
) -> None:
    """A WebSocket opened inside a Worker or SharedWorker reached another local port: the
    context's WebSocket route only sees sockets of page scripts."""
    url = f"ws://127.0.0.1:{tcp.port}/socket"
    outcome = await page_session.page.evaluate(_WORKER_SOCKET_JS, [kind, url, _WAIT_S * 1000])
    await _settle(tcp)
    assert (tcp.connections, tcp.bytes) == (0, 0), (outcome, tcp.first[:80])
    assert outcome != "open"


async def test_worker_websocket_to_an_allowed_origin_still_connects(
    browser: Browser, site: str, tcp: _Listener
) -> None:
    """The same worker socket from a session that allows the listener's origin reaches it:
    the fix closes what is off the list, not WebSockets as such."""
    session = await browser.new_session([site, tcp.origin])
    try:
        assert await session.goto(f"{site}/index.html") is None
        url = f"ws://127.0.0.1:{tcp.port}/socket"
        await session.page.evaluate(_WORKER_SOCKET_JS, ["Worker", url, 1000])
        for _ in range(100):
            if tcp.first:
                break
            await asyncio.sleep(0.05)
        assert tcp.first.startswith(b"GET /socket")
    finally:
        await session.close()


# ICE gathering for one data channel: a STUN binding request goes to every STUN server, a
# TURN allocation to every TURN server, as soon as the local description is set.
_RTC_JS = """([servers, wait]) => new Promise(async (resolve) => {
  if (typeof RTCPeerConnection === 'undefined') return resolve('no RTCPeerConnection');
  let pc;
  try {
    pc = new RTCPeerConnection({iceServers: servers, iceCandidatePoolSize: 1});
    pc.createDataChannel('probe');
    await pc.setLocalDescription(await pc.createOffer());
  } catch (e) { return resolve('throws: ' + e); }
  setTimeout(() => { pc.close(); resolve('gathered'); }, wait);
})"""


async def test_webrtc_stun_sends_nothing(page_session: BrowserSession, udp: _Listener) -> None:
    """STUN over UDP to a local port on no allow-list."""
    servers = [{"urls": f"stun:127.0.0.1:{udp.port}"}]
    outcome = await page_session.page.evaluate(_RTC_JS, [servers, _WAIT_S * 1000])
    await _settle(udp)
    assert udp.bytes == 0, (outcome, udp.first[:40])


async def test_webrtc_turn_over_tcp_sends_nothing(
    page_session: BrowserSession, tcp: _Listener
) -> None:
    """A TURN allocation over TCP to a local port on no allow-list."""
    servers = [
        {"urls": f"turn:127.0.0.1:{tcp.port}?transport=tcp", "username": "u", "credential": "p"}
    ]
    outcome = await page_session.page.evaluate(_RTC_JS, [servers, _WAIT_S * 1000])
    await _settle(tcp)
    assert (tcp.connections, tcp.bytes) == (0, 0), (outcome, tcp.first[:40])


# A WebTransport session is QUIC over UDP: its first Initial packet goes out on construction.
_WEBTRANSPORT_JS = """([url, wait, inWorker]) => new Promise((resolve) => {
  const body = `
    let t;
    try { t = new WebTransport(${JSON.stringify(url)}); }
    catch (e) { postMessage('throws: ' + e); }
    if (t) t.ready.then(() => postMessage('ready'), (e) => postMessage('failed: ' + e));`;
  setTimeout(() => resolve('pending'), wait);
  if (inWorker) {
    const w = new Worker(URL.createObjectURL(new Blob([body], {type: 'text/javascript'})));
    w.onmessage = (e) => resolve(e.data);
    return;
  }
  if (typeof WebTransport === 'undefined') return resolve('no WebTransport');
  const postMessage = resolve;
  try {
    const t = new WebTransport(url);
    t.ready.then(() => postMessage('ready'), (e) => postMessage('failed: ' + e));
  } catch (e) { resolve('throws: ' + e); }
})"""


@pytest.mark.parametrize("where", ["page", "worker", "page, to the allowed site's port"])
async def test_webtransport_sends_nothing(
    page_session: BrowserSession, site: str, where: str
) -> None:
    """WebTransport (HTTP/3 over QUIC, UDP) to a local port on no allow-list, from the page
    and from a worker; and to the UDP port of the allowed site's own port number (the list
    names http:// on TCP, not QUIC)."""
    port = int(site.rsplit(":", 1)[1]) if "allowed" in where else 0
    udp = _Listener(socket.SOCK_DGRAM, port)
    try:
        url = f"https://127.0.0.1:{udp.port}/probe"
        outcome = await page_session.page.evaluate(
            _WEBTRANSPORT_JS, [url, _WAIT_S * 1000, where == "worker"]
        )
        await _settle(udp)
        assert udp.bytes == 0, (outcome, udp.first[:40])
    finally:
        udp.close()


async def test_redirect_hop_off_the_list_sends_nothing(
    page_session: BrowserSession, site: str, tcp: _Listener
) -> None:
    """Playwright does not route the hops of an HTTP redirect: an allowed site's open
    redirect sent one request to a port on no list before the page was sent back."""
    target = f"{tcp.origin}/private"
    error = await page_session.goto(f"{site}/redirect?to={target}")
    assert error == f"navigation to {target!r} blocked: not an allowed site"
    assert page_session.page.url == f"{site}/index.html"
    await _settle(tcp)
    assert (tcp.connections, tcp.bytes) == (0, 0), tcp.first[:80]
