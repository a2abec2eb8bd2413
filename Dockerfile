# syntax=docker/dockerfile:1
# Brine: salt-master, salt-minion, salt-api and the tools (salt, salt-key, salt-run,
# salt-call) in one image. docker-compose.yml runs it as master, api and two minions.
#   docker build -t brine .

# --- Build: the release binaries on Debian bookworm.
FROM rust:1.95-bookworm AS build
# What the build needs, installed by the script scripts/dev-stack and scripts/test also run
# (compilers for libzmq, SQLite and ring, built from source by their crates; pkg-config and
# OpenSSL's headers for the RSA private-key operations).
WORKDIR /src
COPY scripts/build-deps scripts/build-deps
RUN scripts/build-deps && rm -rf /var/lib/apt/lists/*
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --workspace --bins \
 && mkdir -p /out \
 && cp target/release/salt-master target/release/salt-minion target/release/salt-api \
       target/release/salt target/release/salt-key target/release/salt-run \
       target/release/salt-call /out/

# --- Runtime: the binaries and the shared libraries they link (libcrypto for RSA, libstdc++
# for the bundled libzmq), and libpam, which salt-api opens at run time for the pam eauth.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpam0g libssl3 libstdc++6 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
RUN mkdir -p /etc/salt /var/lib/brine/pki /var/cache/brine /var/run/brine /var/log/brine
# 4505 publish, 4506 return (master); 8000 salt-api.
EXPOSE 4505 4506 8000
CMD ["salt-master", "-c", "/etc/salt"]
