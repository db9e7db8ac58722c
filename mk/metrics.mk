# metrics.mk - the Prometheus endpoint is served with libmicrohttpd.
PKGS += libmicrohttpd
