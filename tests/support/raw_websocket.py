"""A WebSocket client on a raw socket that reads nothing after its handshake (a client that never reads)."""

from __future__ import annotations

import base64
import os
import socket
import struct


def raw_client(port: int) -> socket.socket:
    """Connected to ``/ws`` on 127.0.0.1:``port`` with a small receive buffer; the 101 reply read, nothing after."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert b" 101 " in head.split(b"\r\n", 1)[0], head
    return sock


def frame(opcode: int, payload: bytes) -> bytes:
    """One masked client frame (0x1 text, 0x9 ping)."""
    mask, size = os.urandom(4), len(payload)
    header = bytes([0x80 | opcode])
    if size < 126:
        header += bytes([0x80 | size])
    elif size < 65536:
        header += bytes([0x80 | 126]) + struct.pack(">H", size)
    else:
        header += bytes([0x80 | 127]) + struct.pack(">Q", size)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
