#!/bin/sh
# Create the secret files compose.yaml reads (random values), unless they exist:
#   db_password          PostgreSQL's password for the user imq
#   django_secret_key    the portal's session signing key
#   imq_admin_password   the broker administrator's (user admin) first password, set when
#                        the database is new; change it afterwards on the Users page
#   imq_portal_secret    the password of the portal's own broker account imq.portal
#                        (the portal, REST API, /metrics and jobs use it; rotate by
#                        writing a new value and running `docker compose up -d`)
# Run it again after an upgrade: it adds the files a newer compose.yaml names.
# With --https, also https.crt and https.key (docker/https.yaml): a self-signed certificate
# for $IMQ_HTTPS_NAME (default: this host's name) and localhost, valid 825 days, made
# with openssl; replace them with a CA-signed pair for production.
# The directory is the operator's alone; the files are readable inside the containers
# (PostgreSQL runs as uid 999, the system as uid 10001).
set -eu
dir="${IMQ_SECRETS_DIR:-$(dirname "$0")/secrets}"
mkdir -p "$dir"
chmod 700 "$dir"
for name in db_password django_secret_key imq_admin_password imq_portal_secret; do
    if [ ! -s "$dir/$name" ]; then
        python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > "$dir/$name"
        chmod 644 "$dir/$name"
        echo "created $dir/$name"
    fi
done
if [ "${1:-}" = "--https" ] && [ ! -s "$dir/https.crt" ]; then
    name="${IMQ_HTTPS_NAME:-$(hostname -f 2>/dev/null || hostname)}"
    openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=$name" \
        -addext "subjectAltName=DNS:$name,DNS:localhost,IP:127.0.0.1" \
        -keyout "$dir/https.key" -out "$dir/https.crt" 2>/dev/null
    chmod 644 "$dir/https.crt" "$dir/https.key"
    echo "created $dir/https.crt and $dir/https.key (self-signed for $name; clients trust https.crt)"
fi
