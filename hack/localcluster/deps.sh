#!/usr/bin/env bash
# Installs the Debian packages the local e2e cluster needs, if any is missing:
# runc, the CNI plugins (into /usr/lib/cni), busybox for the test image,
# iptables/conntrack for kube-proxy, openssl for the cluster's PKI.
set -euo pipefail
need=()
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v iptables >/dev/null || need+=(iptables)
command -v conntrack >/dev/null || need+=(conntrack)
command -v openssl >/dev/null || need+=(openssl)
command -v ip >/dev/null || need+=(iproute2)
command -v ldd >/dev/null || need+=(libc-bin)
[ ${#need[@]} -eq 0 ] && exit 0
echo "deps: installing ${need[*]}"
if [ "$(id -u)" -ne 0 ]; then echo "deps: run as root, or install: apt-get install ${need[*]}" >&2; exit 1; fi
# Without systemd nothing should be started by a package's init script.
policy=/usr/sbin/policy-rc.d
created=
if [ ! -e $policy ]; then printf '#!/bin/sh\nexit 101\n' >$policy; chmod +x $policy; created=1; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
[ -n "$created" ] && rm -f $policy
exit 0
