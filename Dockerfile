# gpudra's image: the kubelet plugin, the controller and the gpudra CLI. The
# plugin links go-nvml through cgo, so the runtime image needs glibc:
# distroless/base (glibc, no shell, root).
#
#   docker build --build-arg REVISION=$(git rev-parse HEAD) -t ghcr.io/gpudra/gpudra:0.1.0 .
#
# VERSION's default is the chart's appVersion, so the tag above is the one the
# chart pulls (a test keeps the two equal). Without Docker or a registry,
# make image writes the same image as a tarball (see README).
ARG VERSION=0.1.0
ARG REVISION=unknown

FROM golang:1.26.8-bookworm AS build
ARG VERSION
ARG REVISION
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
RUN go build -trimpath -ldflags "-s -w -X github.com/gpudra/gpudra/internal/version.version=${VERSION} -X github.com/gpudra/gpudra/internal/version.revision=${REVISION}" \
    -o /out/bin/ ./cmd/kubelet-plugin ./cmd/controller ./cmd/gpudra \
 && mv /out/bin/kubelet-plugin /out/bin/gpudra-kubelet-plugin && mv /out/bin/controller /out/bin/gpudra-controller \
 && ln -s gpudra /out/bin/kubectl-gpudra
# NVIDIA's CDI hook runs on the host (the chart's init container copies it
# there), whose libc is not this one: linked statically.
RUN go build -trimpath -tags netgo,osusergo -ldflags '-s -w -extldflags "-static"' \
    -o /out/bin/nvidia-cdi-hook github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook

FROM gcr.io/distroless/base-debian12
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="gpudra" \
      org.opencontainers.image.description="gpudra, a Kubernetes DRA driver for NVIDIA GPUs: kubelet plugin, controller and CLI" \
      org.opencontainers.image.source="https://github.com/gpudra/gpudra" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# gpudra for `kubectl debug node/<node> --image <this image> -- gpudra
# inventory`, kubectl-gpudra (a link to it) for `kubectl gpudra`; a copied
# directory keeps its links.
COPY --from=build /out/bin/ /usr/bin/
ENTRYPOINT ["/usr/bin/gpudra-kubelet-plugin"]
