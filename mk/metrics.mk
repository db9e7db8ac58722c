# metrics.mk - the Prometheus endpoint is served with libevent's evhttp (libevent_core +
# libevent_extra, which link only libc: no TLS library in the daemon).
PKGS += libevent_core libevent_extra
