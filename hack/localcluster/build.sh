#!/usr/bin/env bash
# Builds, once, what the local e2e cluster runs, into $GPUDRA_CACHE (default
# ~/.cache/gpudra), one directory per component and version:
#   k8s-v1.37.2/      kube-apiserver kube-controller-manager kube-scheduler
#                     kubelet kube-proxy kubectl
#   etcd-v3.7.3/      etcd
#   containerd-v2.4.2/ containerd containerd-shim-runc-v2 ctr
#   helm-v3.22.0-stamped/ helm (with its version and Kubernetes version stamped)
#   kueue-v0.19.1/    kueue, and config/ (its CRDs and webhook configurations,
#                     from the same module) for the multi-node cluster
# Versions come from the scratch modules under modules/ (and HELM_VERSION), so
# bumping one there rebuilds only that one. A directory is complete when its
# .done file exists; a failed build leaves nothing behind.
#
#   build.sh [k8s|etcd|containerd|helm|kueue]...   (default: all but kueue)
#
# Keep the build flags as they are: Go's build cache then turns a rebuild into
# a relink (under a minute instead of ~16 CPU-minutes for Kubernetes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
CACHE=${GPUDRA_CACHE:-$HOME/.cache/gpudra}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
# -buildvcs=false: the scratch modules live in this repository, and a CI
# checkout may not let go stamp its VCS state.
export GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

modver() { awk -v m="$2" '$1==m || ($1=="require" && $2==m) {print ($1=="require") ? $3 : $2; exit}' "$here/modules/$1/go.mod"; }
K8S_VERSION=$(modver k8s k8s.io/kubernetes)
ETCD_VERSION=$(modver etcd go.etcd.io/etcd/server/v3)
CONTAINERD_VERSION=$(modver containerd github.com/containerd/containerd/v2)
KUEUE_VERSION=$(modver kueue sigs.k8s.io/kueue)

log() { echo "[build $(date +%T)] $*"; }

# done_or_build NAME VERSION FUNC: runs FUNC with $tmp as output directory, then
# moves it into place.
done_or_build() {
  local dir="$CACHE/$1-$2"
  if [ -e "$dir/.done" ]; then log "$1 $2: cached in $dir"; return; fi
  log "$1 $2: building into $dir"
  mkdir -p "$CACHE"
  tmp=$(mktemp -d "$CACHE/.tmp-$1-XXXXXX")
  local t0=$SECONDS
  if ! "$3"; then rm -rf "$tmp"; log "$1 $2: FAILED"; return 1; fi
  touch "$tmp/.done"
  chmod 755 "$tmp"; rm -rf "$dir"; mv "$tmp" "$dir"
  log "$1 $2: built in $((SECONDS - t0)) s"
}

build_k8s() {
  local v=$K8S_VERSION minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  (cd "$here/modules/k8s" && go build -trimpath -ldflags "$ld" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl)
}

build_etcd() {
  (cd "$here/modules/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
}

build_containerd() {
  (cd "$here/modules/containerd" && go build -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "-s -w \
    -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" -o "$tmp/" \
    github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    github.com/containerd/containerd/v2/cmd/ctr)
}

# build_kueue: Kueue's manager, and the CRDs and webhook configurations of
# the same release (kueue.sh applies them).
build_kueue() {
  (cd "$here/modules/kueue" && go build -trimpath -ldflags "-s -w" -o "$tmp/kueue" sigs.k8s.io/kueue/cmd/kueue) || return 1
  local src
  src=$(cd "$here/modules/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue) || return 1
  mkdir -p "$tmp/config/crd"
  cp "$src"/config/components/crd/bases/*.yaml "$tmp/config/crd/"
  cp "$src/config/components/webhook/manifests.yaml" "$tmp/config/webhook.yaml"
  chmod -R u+w "$tmp/config"
}

# helm stamped as helm's own Makefile stamps a release: its version and git
# commit, and the Kubernetes version of the client-go it is built with, which
# helm template and helm lint assume without a cluster (unstamped, helm says
# v1.20, and a chart with kubeVersion ">=1.34" fails to render offline).
build_helm() {
  local info mod commit kminor
  info=$(GOFLAGS= go mod download -json "helm.sh/helm/v3@$HELM_VERSION")
  mod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' <<<"$info")
  commit=$(sed -n 's/^[[:space:]]*"Hash": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")
  kminor=$(awk '$1=="k8s.io/client-go" {split($2, v, "."); print v[2]; exit}' "$mod")
  [ -n "$kminor" ] || { echo "build.sh: no k8s.io/client-go in $mod" >&2; return 1; }
  local ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.metadata="
  ld="$ld -X helm.sh/helm/v3/internal/version.gitCommit=$commit -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ld="$ld -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$kminor"
  done
  GOFLAGS= GOBIN="$tmp" go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

what=("$@"); [ ${#what[@]} -eq 0 ] && what=(helm k8s etcd containerd)
for w in "${what[@]}"; do
  case $w in
    k8s) done_or_build k8s "$K8S_VERSION" build_k8s ;;
    etcd) done_or_build etcd "$ETCD_VERSION" build_etcd ;;
    containerd) done_or_build containerd "$CONTAINERD_VERSION" build_containerd ;;
    helm) done_or_build helm "$HELM_VERSION-stamped" build_helm ;;
    kueue) done_or_build kueue "$KUEUE_VERSION" build_kueue ;;
    paths) echo "K8S_BIN=$CACHE/k8s-$K8S_VERSION ETCD_BIN=$CACHE/etcd-$ETCD_VERSION CONTAINERD_BIN=$CACHE/containerd-$CONTAINERD_VERSION HELM=$CACHE/helm-$HELM_VERSION-stamped/helm KUEUE_BIN=$CACHE/kueue-$KUEUE_VERSION" ;;
    *) echo "build.sh: unknown component $w" >&2; exit 2 ;;
  esac
done
