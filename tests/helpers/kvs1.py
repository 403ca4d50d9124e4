# KVS1 framing for the integration tests' Python clients (docs/PROTOCOL.md,
# include/kvsplice/proto.h): frames built and read in one place instead of
# a struct.pack in every test. Tests import it with
#   PYTHONPATH="$(dirname "$0")/../helpers" python3 ...
import socket
import struct

MAGIC = 0x4b565331
HDR = struct.Struct('>IBBHHHIQQQIIIIQ')  # struct kvs_hdr, 64 bytes
REQUEST, CHUNK, END, ERROR, PING, PONG, CANCEL = 1, 2, 3, 4, 5, 6, 7
# ERROR statuses the tests look for (enum kvs_status)
E_BUSY, E_TIMEOUT = 10, 11


def frame(ftype, payload=b'', req_id=0, cache_key=0, salt=0, model=0, prefix_len=0,
          max_tokens=0, status=0, gw_backend=0, gw_conn=0):
    """A frame; gw_backend and gw_conn are set only by a test playing the
    gateway (or a backend echoing them)."""
    return HDR.pack(MAGIC, 1, ftype, 0, HDR.size, status, len(payload), req_id, cache_key,
                    salt, model, prefix_len, max_tokens, gw_backend, gw_conn) + payload


def request(prompt, req_id, salt=0, max_tokens=1, **kw):
    return frame(REQUEST, prompt, req_id=req_id, salt=salt, max_tokens=max_tokens, **kw)


def ping(req_id):
    return frame(PING, req_id=req_id)


def cancel(req_id, **kw):
    """A CANCEL of request req_id (gw_conn=... when the test plays the gateway)."""
    return frame(CANCEL, req_id=req_id, **kw)


def pong(ping_frame, load=bytes(24)):
    """A backend's answer to a PING Frame: its req_id and the gateway-owned
    fields echoed (docs/PROTOCOL.md), a struct kvs_load payload (all 0: idle)."""
    return frame(PONG, load, req_id=ping_frame.req_id, gw_backend=ping_frame.gw_backend,
                 gw_conn=ping_frame.gw_conn)


def connect(port, src=None, timeout=60):
    """A client connection to 127.0.0.1:port, from address src if given."""
    s = socket.socket()
    if src:
        s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.settimeout(timeout)
    return s


def frame_len(data):
    """The length of the frame at the front of data, or None before its
    header is whole."""
    if len(data) < HDR.size:
        return None
    return HDR.size + struct.unpack('>I', data[12:16])[0]


def split(data):
    """The whole frames at the front of data (a list of Frame), and the bytes
    after them (the start of a frame not yet whole)."""
    frames = []
    while frame_len(data) is not None and len(data) >= frame_len(data):
        n = frame_len(data)
        frames.append(Frame(data[:n]))
        data = data[n:]
    return frames, data


class Frame:
    def __init__(self, raw):
        (_, _, self.type, _, _, self.status, plen, self.req_id, self.cache_key, self.salt,
         _, _, _, self.gw_backend, self.gw_conn) = HDR.unpack(raw[:HDR.size])
        self.payload = raw[HDR.size:HDR.size + plen]

    def end_cached_tokens(self):
        """An END's cached_tokens (struct kvs_end: the second u32)."""
        return struct.unpack('>I', self.payload[4:8])[0]

    def end_backend_id(self):
        """An END's backend_id (struct kvs_end: the seventh u32), the
        backend's --id: which backend served the request."""
        return struct.unpack('>I', self.payload[24:28])[0]

    def text(self):
        return self.payload.decode(errors='replace')


class Reader:
    """Whole frames from a socket, in order."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b''

    def next(self):
        while frame_len(self.buf) is None or len(self.buf) < frame_len(self.buf):
            d = self.sock.recv(65536)
            if not d:
                raise EOFError('gateway closed the connection')
            self.buf += d
        n = frame_len(self.buf)
        raw, self.buf = self.buf[:n], self.buf[n:]
        return Frame(raw)

    def until_end(self):
        """Frames up to this request's END or ERROR; returns that frame."""
        while True:
            f = self.next()
            if f.type in (END, ERROR):
                return f
