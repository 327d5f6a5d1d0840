#!/bin/sh
# The fleet guests' boot step (tests/vm/fleet-ansible.sh). The image's lifecycle-agent runs it
# at the end of every boot while the harness's 9p share `io` is attached, so also after each
# reboot Ansible makes. It gives the overlay its own identity (first boot only), lets the test's
# key in, brings up the management port on qemu's user-mode network (a runtime .network file
# in /run: nothing under /etc changes) and starts sshd (and, where asked, node_exporter), which
# the image keeps disabled so the other variants' boots never run them.
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
    # The image's host keys are the same in every overlay: each guest gets its own.
    rm -f /etc/ssh/ssh_host_*
    ssh-keygen -q -A
    # Under TCG on a loaded machine the kernel's IO-APIC timer check can miss its ticks and
    # panic ("IO-APIC + timer doesn't work!"); cloud images boot with no_timer_check for the
    # same reason. Before the baseline, so the reboots Ansible makes boot with it.
    mkdir -p /etc/default/grub.d
    printf 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX no_timer_check"\n' >/etc/default/grub.d/05-fleet-vm.cfg
    update-grub
    sync
    echo "identity: $name, machine-id $(cat /etc/machine-id) (in effect for the kernel's hostname now, for systemd from the next boot)"
fi
echo "$name" >/proc/sys/kernel/hostname

mkdir -p /root/.ssh
chmod 0700 /root/.ssh
cp "$io/authorized_keys" /root/.ssh/authorized_keys
chmod 0600 /root/.ssh/authorized_keys

# The profiles the role's daqtune_profile names (files on the host, outside /etc).
mkdir -p /var/local/daqtune-fleet
cp "$io"/*.yaml /var/local/daqtune-fleet/

ifname=""
for d in /sys/class/net/*; do
    [ "$(cat "$d/address" 2>/dev/null)" = "$mac" ] && ifname=${d##*/}
done
echo "management port: ${ifname:-none with $mac}"
mkdir -p /run/systemd/network
# 05-: before the image's 20-data.network, which matches every en* port with no address.
cat >/run/systemd/network/05-fleet-mgmt.network <<EOF
[Match]
MACAddress=$mac

[Network]
DHCP=ipv4
LinkLocalAddressing=no
IPv6AcceptRA=no

[Link]
RequiredForOnline=no
EOF
networkctl reload
[ -n "$ifname" ] && networkctl reconfigure "$ifname"
i=0
while [ $i -lt 120 ] && ! ip -4 -o addr show dev "$ifname" 2>/dev/null | grep -q ' inet '; do
    sleep 1
    i=$((i + 1))
done
ip -4 -o addr show dev "$ifname"

systemctl start ssh.service
systemctl is-active ssh.service
if [ -f "$io/node-exporter" ]; then
    systemctl start prometheus-node-exporter.service
    systemctl is-active prometheus-node-exporter.service
fi
echo "ready at $(cut -d' ' -f1 /proc/uptime)s"
