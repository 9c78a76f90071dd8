"""A thread per request in Python: the standard library's ThreadingHTTPServer
on 127.0.0.1 (an ephemeral port, printed on stdout as "port N"), whose
handler spends about `--work` loop rounds of Python in handle_work before it
answers 16 bytes. Each request is a new thread that ends with it (make
bench's pytpr section drives it with wrk, alone and profiled)."""
import argparse
import http.server
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--work", type=int, default=2000, help="loop rounds a request (about 100 us each 1000)")
args = ap.parse_args()


def handle_work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"   # a connection (and so a thread) per request

    def do_GET(self):
        body = b"%015d\n" % (handle_work(args.work) % 10 ** 15)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass   # a client gone at the end of a wrk run: nothing to say


srv = Server(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
print("port %d" % srv.server_address[1], flush=True)
try:
    srv.serve_forever()
except KeyboardInterrupt:
    sys.exit(0)
