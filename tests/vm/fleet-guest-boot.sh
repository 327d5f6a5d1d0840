#!/bin/sh
# The fleet guests' boot step (tests/vm/fleet-ansible.sh). The image's lifecycle-agent runs it
# at the end of every boot while the harness's 9p share `io` is attached, so also after each
# reboot Ansible (or the test) makes. It gives the overlay its own identity (first boot only,
# before the lifecycle phases take their baseline), lets the test's key in, brings up the
# management port on qemu's user-mode network (a runtime .network file in /run: nothing under
# /etc changes) and starts sshd (and, where asked, node_exporter), which the image keeps
# disabled so the lifecycle variants' boots never run them. The lifecycle steps themselves
# are run by the harness over SSH (tests/vm/lifecycle-guest.sh fleet-*).
io=/run/lifecycle-io
exec >>"$io/boots.log" 2>&1
echo "--- boot $(cat /proc/sys/kernel/random/boot_id) at $(cut -d' ' -f1 /proc/uptime)s"
name=$(cat "$io/hostname")
mac=$(cat "$io/mgmt-mac")

# Identity: written before the test's baseline checksums, never again.
if [ "$(cat /etc/hostname)" != "$name" ]; then
    echo "$name" >/etc/hostname
    printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n' "$name" >/etc/hosts
    cat "$io/machine-id" >/etc/machine-id
    # The image's host keys are the same in every overlay: each guest gets its own, made by
    # the test on the host (an RSA key made under TCG cost most of a minute of the first boot).
    rm -f /etc/ssh/ssh_host_*
    install -m 0600 "$io/ssh_host_ed25519_key" /etc/ssh/ssh_host_ed25519_key
    install -m 0644 "$io/ssh_host_ed25519_key.pub" /etc/ssh/ssh_host_ed25519_key.pub
    sync
    echo "identity: $name, machine-id $(cat /etc/machine-id) (in effect for the kernel's hostname now, for systemd from the next boot)"
fi
echo "$name" >/proc/sys/kernel/hostname

# Ansible's module code compiled once per guest instead of on every module run
# (tests/vm/fleet-guest-bytecode.py says why and how); a .pth line in a site directory loads
# the hook in every Python the guest starts.
site=/usr/lib/python3/dist-packages
if [ -f "$io/ansible-bytecode.py" ] && [ -d "$site" ]; then
    cp "$io/ansible-bytecode.py" "$site/ansible_zip_bytecode.py"
    echo "import ansible_zip_bytecode" >"$site/ansible-zip-bytecode.pth"
fi

mkdir -p /root/.ssh
chmod 0700 /root/.ssh
cp "$io/authorized_keys" /root/.ssh/authorized_keys
chmod 0600 /root/.ssh/authorized_keys

ifname=""
for d in /sys/class/net/*; do
    [ "$(cat "$d/address" 2>/dev/null)" = "$mac" ] && ifname=${d##*/}
done
echo "management port: ${ifname:-none with $mac}"
mkdir -p /run/systemd/network
# 05-: before the image's 20-data.network, which matches every en* port with no address.
# A static address: qemu's user-mode network forwards the test's ports to 10.0.2.15, its
# first guest address; no DHCP exchange to wait for or lose.
cat >/run/systemd/network/05-fleet-mgmt.network <<EOF
[Match]
MACAddress=$mac

[Network]
Address=10.0.2.15/24
LinkLocalAddressing=no
IPv6AcceptRA=no

[Link]
RequiredForOnline=no
EOF
# Twice (2026-11-27, the extlinux guest's third boot, and 2026-11-30, the GRUB guest's partial
# revert) the port had no address after rounds of `networkctl reload` and `reconfigure` every
# 10 s, and this script set it by hand. systemd 252's networkctl(1), the guests' version, says
# `reload` itself reconfigures every link a new, changed or removed .network file matches, so a
# `reconfigure` right after it started the port's setup a second time, and each round restarted
# it again. Now: reload and wait up to 30 s; then one `reconfigure` (in case the reload ran before
# networkd saw the port) and 30 s more; then by hand. The log says which was needed.
has_address() { ip -4 -o addr show dev "$ifname" 2>/dev/null | grep -q ' inet 10.0.2.15/'; }
address_within_30s() {
    i=0
    while [ $i -lt 60 ] && ! has_address; do
        sleep 0.5
        i=$((i + 1))
    done
    has_address
}
how="networkctl reload"
networkctl reload
if ! address_within_30s; then
    how="networkctl reload, then reconfigure"
    [ -n "$ifname" ] && networkctl reconfigure "$ifname"
    if ! address_within_30s; then
        how="by hand"
        echo "networkd gave $ifname no address after reload and reconfigure: $(networkctl status "$ifname" 2>&1 | tr '\n' ' ' | cut -c1-600)"
        ip link set "$ifname" up
        ip addr add 10.0.2.15/24 dev "$ifname"
    fi
fi
echo "management address ($how, at $(cut -d' ' -f1 /proc/uptime)s): $(ip -4 -o addr show dev "$ifname")"

# The agent unmounts the share when this script returns, and the lifecycle phases the harness
# runs over SSH (tests/vm/lifecycle-guest.sh fleet-*) read and write it: a transient unit,
# outside the agent's cgroup, mounts it again once the agent let go (a virtio 9p channel takes
# one mount at a time), and only then starts sshd, so a guest that answers on SSH has its share.
units="ssh.service"
[ -f "$io/node-exporter" ] && units="$units prometheus-node-exporter.service"
cat >/run/fleet-ready.sh <<EOF
#!/bin/sh
i=0
while mountpoint -q $io && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 io $io
systemctl start $units
echo "ready at \$(cut -d' ' -f1 /proc/uptime)s: \$(systemctl is-active $units | tr '\\n' ' ')" >>$io/boots.log
EOF
systemd-run --no-block --quiet --unit=fleet-ready --service-type=oneshot /bin/sh /run/fleet-ready.sh
echo "share handed to fleet-ready.service at $(cut -d' ' -f1 /proc/uptime)s"
