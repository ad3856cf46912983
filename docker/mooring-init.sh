#!/usr/bin/env bash
# The one-shot init steps of a secure Mooring stack (docker/compose.yaml, deploy/kubernetes).
# Every step does only what is missing, so running it again (a restarted init container, a
# re-applied Job) changes nothing that exists. Secrets are files written 0600 and never printed.
#
#   mooring-init.sh tls -dir DIR [-dns NAME]... [-ip IP]... [-ca-out FILE]
#                       [-etcd-dir DIR -etcd-dns NAME... [-etcd-ip IP]...] [-keyring FILE]
#       DIR/ca.pem, ca-key.pem (the CA) and server.pem, server-key.pem (the control plane,
#       spiffe://mooring/server, SANs localhost, 127.0.0.1 and the -dns/-ip names), if absent;
#       with -ca-out also a copy of ca.pem (never the key) for agents and clients.
#       High availability: with -etcd-dir, etcd's TLS from a CA of its own (a certificate of
#       the Mooring CA, a node agent's say, opens no etcd door): etcd-dir/ca (that CA, with its
#       key: the init's alone), etcd-dir/member (ca.pem, server.pem, server-key.pem: every
#       member's, client and peer TLS, for the -etcd-dns names and -etcd-ip addresses) and etcd-dir/client (ca.pem,
#       client.pem, client-key.pem: the control planes' etcd client certificate); with -keyring,
#       the keyring every control plane of the cluster seals secrets with (mooring-keyring/1, one
#       random AES-256 key), if absent.
#   mooring-init.sh acl -addr URL -ca-cert FILE -token-file FILE -enroll-token-file FILE
#       waits until the control plane at URL is ready; bootstraps ACLs once, keeping the
#       management token in -token-file; then, with it, the policy "node-enroll" (Node: write)
#       and a token of it in -enroll-token-file: the nodes' introducer (see enroll).
#   mooring-init.sh enroll -addr URL -ca-cert FILE (-intro-token-file FILE | -token-file FILE)
#                          -node-id ID -dir DIR
#       agent side: makes a key in DIR and has the control plane sign a certificate for
#       spiffe://mooring/node/ID (node enrollment; the CA key never comes here), unless DIR holds
#       one valid for more than 10 minutes: a running agent renews its own certificate over
#       mutual TLS, so this runs only for a new node or one whose certificate ran out. The
#       credential is a one-time introduction token made for this node (-intro-token-file, when
#       that file is there and not empty), or else the node-enroll token (-token-file), with which
#       the step first makes such a token for its own node (mooring node intro create, 10 minutes).
#       Either way the control plane refuses a node that is live or holds an unexpired
#       certificate: purge it first (docs/node-enrollment.md).
#   mooring-init.sh k8s-tls -namespace NS [-dns NAME]... [-etcd-dns NAME... -etcd-secrets PREFIX]
#                           [-keyring-secret NAME]   and   k8s-acl -namespace NS -addr URL
#       the same two control plane steps with Kubernetes Secrets as the store: a Secret that
#       exists is read, what a step adds is written as a new Secret (see deploy/kubernetes):
#         mooring-controlplane-tls  ca.pem ca-key.pem server.pem server-key.pem (control plane only)
#         mooring-ca                ca.pem (public: agents and clients check the server with it)
#         mooring-bootstrap-token   token (management; for operators)
#         mooring-enroll-token      token (node:write: the agents' DaemonSet makes each node's
#                                   introduction token with it)
#       and for high availability (deploy/kubernetes-ha):
#         PREFIX-member             ca.pem server.pem server-key.pem (etcd's members only)
#         PREFIX-client             ca.pem client.pem client-key.pem (the control planes only)
#         PREFIX-ca                 ca.pem ca-key.pem (etcd's CA: no pod mounts it; read here only
#                                   to sign a missing member or client certificate)
#         -keyring-secret NAME      keyring (every control plane replica)
#       Uses the pod's service account (get and create on secrets in NS).
#
# Environment: MOORING (the CLI, default `mooring`), MOORING_INIT_WAIT (seconds to wait for the
# control plane, default 300), KUBERNETES_API and MOORING_INIT_SA_DIR (the Kubernetes API and the
# service account files; defaults are the in-cluster ones).
set -euo pipefail

MOORING=${MOORING:-mooring}
WAIT=${MOORING_INIT_WAIT:-300}
ENROLL_POLICY=node-enroll

say() { echo "mooring-init: $*" >&2; }
die() {
  say "$*"
  exit 1
}

# ---- options: -name value pairs; -dns and -ip may repeat ----
DIR='' ADDR='' CA_CERT='' TOKEN_FILE='' ENROLL_TOKEN_FILE='' INTRO_TOKEN_FILE='' NODE_ID='' NAMESPACE='' CA_OUT=''
ETCD_DIR='' KEYRING='' ETCD_SECRETS='' KEYRING_SECRET=''
DNS=() IPS=() ETCD_DNS=() ETCD_IPS=()
parse_options() {
  while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || die "option $1 needs a value"
    case "$1" in
      -dir) DIR=$2 ;;
      -addr) ADDR=$2 ;;
      -ca-cert) CA_CERT=$2 ;;
      -token-file) TOKEN_FILE=$2 ;;
      -enroll-token-file) ENROLL_TOKEN_FILE=$2 ;;
      -intro-token-file) INTRO_TOKEN_FILE=$2 ;;
      -node-id) NODE_ID=$2 ;;
      -namespace) NAMESPACE=$2 ;;
      -ca-out) CA_OUT=$2 ;;
      -etcd-dir) ETCD_DIR=$2 ;;
      -keyring) KEYRING=$2 ;;
      -etcd-secrets) ETCD_SECRETS=$2 ;;
      -keyring-secret) KEYRING_SECRET=$2 ;;
      -etcd-dns) ETCD_DNS+=("$2") ;;
      -etcd-ip) ETCD_IPS+=("$2") ;;
      -dns) DNS+=("$2") ;;
      -ip) IPS+=("$2") ;;
      *) die "unknown option $1 (see the head of $0)" ;;
    esac
    shift 2
  done
}
need() {
  local name
  for name in "$@"; do
    local var=${name//-/_}
    var=${var^^}
    [ -n "${!var}" ] || die "$STEP needs -$name"
  done
}

# A file's single line, the secret it holds (never echoed).
read_secret_file() { tr -d ' \n' < "$1"; }
# Writes stdin to FILE, 0600, atomically (a reader sees the old file or the whole new one).
write_secret_file() {
  local file=$1 tmp
  mkdir -p "$(dirname "$file")"
  tmp=$(mktemp "$file.XXXXXX")
  cat > "$tmp"
  chmod 0600 "$tmp"
  mv -f "$tmp" "$file"
}
# The value of "Key": "..." in the CLI's JSON output.
json_field() { sed -n 's/.*"'"$1"'": *"\([^"]*\)".*/\1/p' | head -n 1; }

# ---- tls: the CA and the control plane's certificate ----
# A CA (ca.pem, ca-key.pem) in DIR $1, called $2 in what is said, unless it is there.
make_ca() {
  local dir=$1 what=$2
  if [ -f "$dir/ca.pem" ] && [ -f "$dir/ca-key.pem" ]; then
    say "$what: $dir/ca.pem is there"
  elif [ -e "$dir/ca.pem" ] || [ -e "$dir/ca-key.pem" ]; then
    die "$dir holds only half of the $what (ca.pem / ca-key.pem); restore the other file or remove both"
  else
    mkdir -p "$dir"
    "$MOORING" tls ca create -dir "$dir" >/dev/null
    say "$what: created $dir/ca.pem"
  fi
}

step_tls() {
  need dir
  local names=() ips=()
  local n
  for n in "${DNS[@]}"; do names+=(-additional-dnsname "$n"); done
  for n in "${IPS[@]}"; do ips+=(-additional-ipaddress "$n"); done
  make_ca "$DIR" CA
  if [ -f "$DIR/server.pem" ] && [ -f "$DIR/server-key.pem" ]; then
    say "server certificate: $DIR/server.pem is there"
  else
    rm -f "$DIR/server.pem" "$DIR/server-key.pem"  # half a pair is useless; make a whole one
    "$MOORING" tls cert create -server -dir "$DIR" "${names[@]}" "${ips[@]}" >/dev/null
    say "server certificate: created $DIR/server.pem"
  fi
  if [ -n "$CA_OUT" ] && ! cmp -s "$DIR/ca.pem" "$CA_OUT"; then
    write_secret_file "$CA_OUT" < "$DIR/ca.pem"
    say "CA certificate copied to $CA_OUT"
  fi
  [ -z "$ETCD_DIR" ] || step_etcd_tls
  [ -z "$KEYRING" ] || step_keyring
}

# etcd's TLS, from a CA of its own (never the Mooring CA: a certificate that CA signed, a node
# agent's among them, must open no etcd door). Under ETCD_DIR:
#   ca/      ca.pem ca-key.pem            the etcd CA (only the init reads the key)
#   member/  ca.pem server.pem server-key.pem   every member's (serverAuth and clientAuth: members
#                                          dial each other with it), for the -etcd-dns names
#   client/  ca.pem client.pem client-key.pem   the control planes' etcd client certificate
# Each made when absent; the CA never beside what it signed.
step_etcd_tls() {
  [ ${#ETCD_DNS[@]} -gt 0 ] || die "-etcd-dir needs the members' names (-etcd-dns NAME, repeated)"
  local ca=$ETCD_DIR/ca member=$ETCD_DIR/member client=$ETCD_DIR/client
  if [ -e "$ETCD_DIR/server.pem" ]; then
    say "etcd: $ETCD_DIR/server.pem is from an older init that signed it with the Mooring CA; etcd no longer uses it: remove it"
  fi
  if [ ! -f "$ca/ca.pem" ] && { [ -e "$member/server.pem" ] || [ -e "$client/client.pem" ]; }; then
    die "etcd's CA ($ca/ca.pem) is gone but certificates it signed remain in $member and $client: remove those to start over"
  fi
  make_ca "$ca" "etcd CA"
  if [ -f "$member/server.pem" ] && [ -f "$member/server-key.pem" ]; then
    say "etcd member certificate: $member/server.pem is there"
  else
    local names=() n
    for n in "${ETCD_DNS[@]}"; do names+=(-additional-dnsname "$n"); done
    for n in "${ETCD_IPS[@]}"; do names+=(-additional-ipaddress "$n"); done
    rm -f "$member/server.pem" "$member/server-key.pem"
    mkdir -p "$member"
    "$MOORING" tls cert create -server -dir "$member" -ca "$ca/ca.pem" -ca-key "$ca/ca-key.pem" "${names[@]}" >/dev/null
    say "etcd member certificate: created $member/server.pem"
  fi
  if [ -f "$client/client.pem" ] && [ -f "$client/client-key.pem" ]; then
    say "etcd client certificate: $client/client.pem is there"
  else
    # clientAuth only: it opens etcd and serves nothing.
    rm -f "$client/client.pem" "$client/client-key.pem" "$client/cli.pem" "$client/cli-key.pem"
    mkdir -p "$client"
    "$MOORING" tls cert create -cli -dir "$client" -ca "$ca/ca.pem" -ca-key "$ca/ca-key.pem" >/dev/null
    mv -f "$client/cli-key.pem" "$client/client-key.pem"
    mv -f "$client/cli.pem" "$client/client.pem"
    say "etcd client certificate: created $client/client.pem"
  fi
  local d
  for d in "$member" "$client"; do
    cmp -s "$ca/ca.pem" "$d/ca.pem" || write_secret_file "$d/ca.pem" < "$ca/ca.pem"
  done
}

# The keyring the control planes share (the format services/controlplane/secrets/keyring.cpp reads).
step_keyring() {
  if [ -s "$KEYRING" ]; then
    say "keyring: $KEYRING is there"
    return
  fi
  local id key
  id=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
  key=$(head -c 32 /dev/urandom | base64 -w0)
  printf '{\n  "Format": "mooring-keyring/1",\n  "Active": "%s",\n  "Keys": [{"ID": "%s", "Key": "%s", "Created": "%s"}]\n}\n' \
    "$id" "$id" "$key" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" | write_secret_file "$KEYRING"
  say "keyring: created $KEYRING"
}

# ---- acl: bootstrap once, then the enrollment policy and token ----
wait_ready() {
  local deadline=$((SECONDS + WAIT)) leader
  until curl -fsS --cacert "$CA_CERT" "$ADDR/v1/status/ready" >/dev/null 2>&1; do
    # A standby of a highly available control plane is never ready itself; it forwards to the
    # leader it names, so that leader being ready will do.
    leader=$(curl -fsS --cacert "$CA_CERT" "$ADDR/v1/status/leader" 2>/dev/null | tr -d '"') || leader=''
    if [ -n "$leader" ] && curl -fsS --cacert "$CA_CERT" "$leader/v1/status/ready" >/dev/null 2>&1; then
      return
    fi
    [ $SECONDS -lt "$deadline" ] || die "the control plane at $ADDR was not ready within ${WAIT}s"
    sleep 1
  done
}

step_acl() {
  need addr ca-cert token-file enroll-token-file
  export MOORING_ADDR=$ADDR MOORING_CACERT=$CA_CERT
  unset MOORING_TOKEN
  wait_ready
  if [ -s "$TOKEN_FILE" ]; then
    say "ACL bootstrap: done before (token in $TOKEN_FILE)"
  else
    local answer err
    err=$(mktemp)
    if ! answer=$("$MOORING" -json acl bootstrap 2>"$err"); then
      local why
      why=$(cat "$err")
      rm -f "$err"
      case "$why" in
        *"already done"*) die "ACL bootstrap was done, but not by this init: put the management token in $TOKEN_FILE" ;;
        *) die "ACL bootstrap failed: $why" ;;
      esac
    fi
    rm -f "$err"
    printf '%s\n' "$answer" | json_field SecretID | write_secret_file "$TOKEN_FILE"
    [ -s "$TOKEN_FILE" ] || die "ACL bootstrap answered without a SecretID"
    say "ACL bootstrap: management token kept in $TOKEN_FILE"
  fi
  MOORING_TOKEN=$(read_secret_file "$TOKEN_FILE")
  export MOORING_TOKEN
  if [ -s "$ENROLL_TOKEN_FILE" ]; then
    say "enrollment token: there ($ENROLL_TOKEN_FILE)"
    return
  fi
  local rules
  rules=$(mktemp)
  echo '{"Node": "write"}' > "$rules"
  "$MOORING" acl policy apply -description "node agents enroll (POST /v1/node/:id/enroll)" \
    "$ENROLL_POLICY" "$rules" >/dev/null
  rm -f "$rules"
  "$MOORING" -json acl token create -name "$ENROLL_POLICY" -policy "$ENROLL_POLICY" |
    json_field SecretID | write_secret_file "$ENROLL_TOKEN_FILE"
  [ -s "$ENROLL_TOKEN_FILE" ] || die "creating the enrollment token answered without a SecretID"
  say "enrollment token: policy $ENROLL_POLICY (Node: write), token kept in $ENROLL_TOKEN_FILE"
}

# ---- enroll: the agent's certificate, its key made here ----
# Re-enroll only a certificate about to end: a running agent renews its own two thirds in.
RENEW_WITHIN=10m
step_enroll() {
  need addr ca-cert node-id dir
  export MOORING_ADDR=$ADDR MOORING_CACERT=$CA_CERT
  unset MOORING_TOKEN
  local request=("$MOORING" tls cert request -node-id "$NODE_ID" -dir "$DIR" -renew-within "$RENEW_WITHIN")
  if [ -n "$INTRO_TOKEN_FILE" ] && [ -s "$INTRO_TOKEN_FILE" ]; then
    "${request[@]}" -intro-token-file "$INTRO_TOKEN_FILE" >&2
    return
  fi
  [ -n "$TOKEN_FILE" ] || die "enroll needs -intro-token-file (this node's introduction token) or -token-file (the node-enroll token)"
  [ -s "$TOKEN_FILE" ] || die "no enrollment token in $TOKEN_FILE"
  # Nothing to do while the certificate holds: no token made, nothing asked.
  if "${request[@]}" -check-only >&2; then
    return
  fi
  local intro
  intro=$(mktemp)
  # shellcheck disable=SC2064
  trap "rm -f '$intro'" EXIT
  MOORING_TOKEN=$(read_secret_file "$TOKEN_FILE") \
    "$MOORING" node intro create -node-id "$NODE_ID" -ttl 10m -out "$intro" >/dev/null ||
    die "cannot make an introduction token for node $NODE_ID with the token in $TOKEN_FILE"
  "${request[@]}" -intro-token-file "$intro" >&2
  rm -f "$intro"
}

# ---- Kubernetes: Secrets as the store of the two control plane steps ----
K8S_API=${KUBERNETES_API:-https://kubernetes.default.svc}
SA_DIR=${MOORING_INIT_SA_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}
kube() {
  # The service account token goes in a header file, not on a command line `ps` shows.
  local header
  header=$(mktemp)
  printf 'Authorization: Bearer %s\n' "$(cat "$SA_DIR/token")" > "$header"
  local status
  status=$(curl -sS -o "$KUBE_OUT" -w '%{http_code}' --cacert "$SA_DIR/ca.crt" -H "@$header" \
    -H 'Content-Type: application/json' "$@") || status=000
  rm -f "$header"
  echo "$status"
}
secrets_url() { echo "$K8S_API/api/v1/namespaces/$NAMESPACE/secrets"; }

# Secret NAME's keys into WORK/<key>; false when there is no such Secret.
secret_pull() {
  local name=$1 status key
  status=$(kube "$(secrets_url)/$name")
  case "$status" in
    200) ;;
    404) return 1 ;;
    *) die "reading Secret $NAMESPACE/$name: HTTP $status: $(head -c 300 "$KUBE_OUT")" ;;
  esac
  shift
  for key in "$@"; do
    local value
    value=$(tr -d '\n' < "$KUBE_OUT" | sed -n 's/.*"data": *{[^}]*"'"${key//./\\.}"'": *"\([^"]*\)".*/\1/p')
    [ -n "$value" ] || die "Secret $NAMESPACE/$name has no key $key"
    printf '%s' "$value" | base64 -d | write_secret_file "$WORK/$key"
  done
}

# A new Secret NAME from WORK/<key> files. One that appeared meanwhile (another init) is kept:
# the caller pulls it again, so everyone goes on with the same content.
secret_push() {
  local name=$1 body sep="" key
  shift
  body=$(mktemp -p "$WORK")
  {
    printf '{"apiVersion":"v1","kind":"Secret","type":"Opaque","metadata":{"name":"%s",' "$name"
    printf '"labels":{"app.kubernetes.io/part-of":"mooring"}},"data":{'
    for key in "$@"; do
      printf '%s"%s":"%s"' "$sep" "$key" "$(base64 -w0 < "$WORK/$key")"
      sep=,
    done
    printf '}}'
  } > "$body"
  local status
  status=$(kube -X POST --data-binary "@$body" "$(secrets_url)")
  rm -f "$body"
  case "$status" in
    201) say "Secret $NAMESPACE/$name created" ;;
    409) say "Secret $NAMESPACE/$name was created meanwhile; using that one" ;;
    *) die "creating Secret $NAMESPACE/$name: HTTP $status: $(head -c 300 "$KUBE_OUT")" ;;
  esac
}

k8s_setup() {
  need namespace
  [ -r "$SA_DIR/token" ] || die "no service account token in $SA_DIR"
  WORK=$(mktemp -d)
  chmod 0700 "$WORK"
  KUBE_OUT=$WORK/.response
  # WORK is pointed at subdirectories on the way; the whole of it goes at exit, on failure too.
  K8S_WORK=$WORK
  trap 'rm -rf "$K8S_WORK"' EXIT
}

step_k8s_tls() {
  k8s_setup
  local files=(ca.pem ca-key.pem server.pem server-key.pem)
  if ! secret_pull mooring-controlplane-tls "${files[@]}"; then
    DIR=$WORK step_tls
    secret_push mooring-controlplane-tls "${files[@]}"
    secret_pull mooring-controlplane-tls "${files[@]}"
  fi
  # The CA certificate alone, for agents and clients (never the key).
  if ! secret_pull mooring-ca ca.pem; then
    secret_push mooring-ca ca.pem
  fi
  [ -z "$ETCD_SECRETS" ] || k8s_etcd_tls
  if [ -n "$KEYRING_SECRET" ] && ! secret_pull "$KEYRING_SECRET" keyring; then
    KEYRING=$WORK/keyring step_keyring
    secret_push "$KEYRING_SECRET" keyring
  fi
}

# etcd's three Secrets (see step_etcd_tls): PREFIX-member for the members, PREFIX-client for the
# control planes, PREFIX-ca (the etcd CA with its key) for this step alone, to sign a missing one.
# Each in a directory of its own, as step_etcd_tls lays them out (secret_pull writes WORK/<key>).
k8s_etcd_tls() {
  local base=$WORK etcd=$WORK/etcd have_member=1 have_client=1
  local member_keys=(ca.pem server.pem server-key.pem) client_keys=(ca.pem client.pem client-key.pem)
  mkdir -p "$etcd/ca" "$etcd/member" "$etcd/client"
  WORK=$etcd/member secret_pull "$ETCD_SECRETS-member" "${member_keys[@]}" || have_member=0
  WORK=$etcd/client secret_pull "$ETCD_SECRETS-client" "${client_keys[@]}" || have_client=0
  if [ $have_member = 1 ] && [ $have_client = 1 ]; then
    return
  fi
  if ! WORK=$etcd/ca secret_pull "$ETCD_SECRETS-ca" ca.pem ca-key.pem; then
    if [ $have_member = 1 ] || [ $have_client = 1 ]; then
      die "Secret $NAMESPACE/$ETCD_SECRETS-ca (etcd's CA) is gone but what it signed remains: delete Secrets $ETCD_SECRETS-member and $ETCD_SECRETS-client to start over"
    fi
    make_ca "$etcd/ca" "etcd CA"
    WORK=$etcd/ca secret_push "$ETCD_SECRETS-ca" ca.pem ca-key.pem
    WORK=$etcd/ca secret_pull "$ETCD_SECRETS-ca" ca.pem ca-key.pem  # another init's, if it came first
  fi
  ETCD_DIR=$etcd step_etcd_tls
  if [ $have_member = 0 ]; then
    WORK=$etcd/member secret_push "$ETCD_SECRETS-member" "${member_keys[@]}"
  fi
  if [ $have_client = 0 ]; then
    WORK=$etcd/client secret_push "$ETCD_SECRETS-client" "${client_keys[@]}"
  fi
  WORK=$base
}

step_k8s_acl() {
  need addr
  k8s_setup
  secret_pull mooring-ca ca.pem || die "Secret $NAMESPACE/mooring-ca is missing: run the k8s-tls step first"
  mv "$WORK/ca.pem" "$WORK/ca-cert.pem"  # a name that is no Secret key
  secret_pull mooring-bootstrap-token token || true
  [ ! -f "$WORK/token" ] || mv "$WORK/token" "$WORK/bootstrap"
  secret_pull mooring-enroll-token token || true
  [ ! -f "$WORK/token" ] || mv "$WORK/token" "$WORK/enroll"
  local had_bootstrap=0 had_enroll=0
  [ -s "$WORK/bootstrap" ] && had_bootstrap=1
  [ -s "$WORK/enroll" ] && had_enroll=1
  CA_CERT=$WORK/ca-cert.pem TOKEN_FILE=$WORK/bootstrap ENROLL_TOKEN_FILE=$WORK/enroll step_acl
  if [ $had_bootstrap = 0 ]; then
    cp -p "$WORK/bootstrap" "$WORK/token"
    secret_push mooring-bootstrap-token token
  fi
  if [ $had_enroll = 0 ]; then
    cp -p "$WORK/enroll" "$WORK/token"
    secret_push mooring-enroll-token token
  fi
}

STEP=${1:-}
[ -n "$STEP" ] || die "usage: $0 tls|acl|enroll|k8s-tls|k8s-acl [options] (see the head of this file)"
shift
parse_options "$@"
case "$STEP" in
  tls) step_tls ;;
  acl) step_acl ;;
  enroll) step_enroll ;;
  k8s-tls) step_k8s_tls ;;
  k8s-acl) step_k8s_acl ;;
  *) die "unknown step $STEP: tls, acl, enroll, k8s-tls or k8s-acl" ;;
esac
