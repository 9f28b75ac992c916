# Two spans on the span line protocol: setup (100 ms of busy work), then work (the
# seconds given as the only argument). Used by run.sh.
import sys, time, os, threading
tid = threading.get_native_id()
def span(name, secs):
    print(f"@gapscope1 B {tid} {time.monotonic_ns()} {name}", flush=True)
    end = time.monotonic() + secs
    while time.monotonic() < end: pass
    print(f"@gapscope1 E {tid} {time.monotonic_ns()} {name}", flush=True)
span("setup", 0.1)
span("work", float(sys.argv[1]))
