#!/usr/bin/python3
"""in_netns.py [--pod-ip IP] CMD ARGS…: run CMD in a network namespace of its own, with only
loopback (up), and with --pod-ip one more local address on it (a pod's address, which
Kubernetes' probes connect to).

The packaging checks start the service on the ports the unit, the image and the manifests name
(8080, 8081, on 127.0.0.1 or 0.0.0.0) exactly as given: in a private namespace nothing else on
the machine holds them, and nothing outside can reach the service. Needs root (unshare).
"""
import fcntl
import os
import socket
import struct
import sys

if os.environ.get("FLOODGATE_IN_NETNS") != "1":
    os.environ["FLOODGATE_IN_NETNS"] = "1"
    os.execvp("unshare", ["unshare", "--net", sys.executable, os.path.abspath(__file__)] + sys.argv[1:])

SIOCGIFFLAGS, SIOCSIFFLAGS, SIOCSIFADDR, SIOCSIFNETMASK, IFF_UP = 0x8913, 0x8914, 0x8916, 0x891C, 0x1


def sockaddr(name, ip):  # struct ifreq with a sockaddr_in
    return struct.pack("16sH2s4s8x", name, socket.AF_INET, b"\0\0", socket.inet_aton(ip))


args = sys.argv[1:]
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    ifreq = struct.pack("16sH14x", b"lo", 0)
    flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
    if args[:1] == ["--pod-ip"]:
        fcntl.ioctl(s, SIOCSIFADDR, sockaddr(b"lo:1", args[1]))
        fcntl.ioctl(s, SIOCSIFNETMASK, sockaddr(b"lo:1", "255.255.255.255"))
        args = args[2:]
del os.environ["FLOODGATE_IN_NETNS"]
os.execvp(args[0], args)
