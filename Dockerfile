# Builds the eventhub binary (pure Go: no C toolchain needed) into a small
# image that runs as an unprivileged user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/eventhub ./cmd/eventhub

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/eventhub /eventhub
USER 65532:65532
ENTRYPOINT ["/eventhub"]
CMD ["serve"]
