# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_roce_route_global_optspecs
    string join \n netns= state-dir= lock-timeout= json v/verbose q/quiet h/help V/version
end

function __fish_roce_route_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_roce_route_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_roce_route_using_subcommand
    set -l cmd (__fish_roce_route_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c roce-route -n "__fish_roce_route_needs_command" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_needs_command" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_needs_command" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_needs_command" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_needs_command" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_needs_command" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_needs_command" -s h -l help -d 'Print help'
complete -c roce-route -n "__fish_roce_route_needs_command" -s V -l version -d 'Print version'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "discover" -d 'Print a config for this host\'s RDMA NICs'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "apply" -d 'Make the host\'s tables, rules and ARP sysctls match CONFIG'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "rollback" -d 'Undo the most recent apply (or remove) exactly'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "remove" -d 'Take out every route and rule roce-route owns; restore the sysctls'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "check" -d 'Exit 0 when the host is as CONFIG asks (state and traffic), 3 when not'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "show" -d 'Show what roce-route owns now, by interface, and where traffic goes'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "confirm" -d 'Keep the change of a waiting `apply --confirm`'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "announce" -d 'Announce every address of CONFIG to the peers now, each from its own rail'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "watch" -d 'Keep the host as the latest apply left it: heal what others take away'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "nccl-env" -d 'Print NCCL\'s settings for the rails of CONFIG (or of the latest apply)'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "probe" -d 'Probe the rails on the wire against their peers; a verdict per pair'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, ...) on stdout'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "man" -d 'Print a manual page (roff) on stdout: `roce-route man | man -l -`'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "confirm-guard" -d '(internal) The guard `apply --confirm` starts: reverts the change at the deadline unless it is confirmed'
complete -c roce-route -n "__fish_roce_route_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c roce-route -n "__fish_roce_route_using_subcommand discover" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand discover" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand discover" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand discover" -l interfaces -d 'Take the netdevs whose names match these shell patterns (`rail*`, `ens?f0np0`), whether or not they have an RDMA device, instead of the netdevs of the RDMA ports' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand discover" -l sysfs-root -d 'Read the RDMA devices (`class/infiniband`) and netdev facts (`class/net`) from this copy of sysfs instead of /sys. Netdevs and addresses still come from the network namespace over rtnetlink' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand discover" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand discover" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand discover" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand discover" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l confirm -d 'Keep the change only if `roce-route confirm` runs (or Enter is pressed) within SECONDS; otherwise roll it back' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l install -d 'Put the config file into DIR (the directory the boot unit applies, e.g. /etc/roce-route/) once its change is in place: at once, or with --confirm only once confirmed, so that a reverted trial never reaches the next boot. Applies DIR\'s other *.toml files with it, as the boot unit will. Takes one config file' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l settle -d 'Wait up to SECONDS for the addresses the plan uses that are still in IPv6 duplicate address detection (tentative; never link-local ones) before taking them for not ready' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l sysfs-root -d 'Read the RDMA devices (`class/infiniband`) and netdev facts (`class/net`) from this copy of sysfs instead of /sys. Netdevs and addresses still come from the network namespace over rtnetlink' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l dry-run -d 'Print the changes as iproute2/sysctl commands and change nothing'
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l adopt -d 'Take over conflicting entries that roce-route does not own (source rules for configured addresses, routes in configured tables)'
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l strict -d 'All or nothing: when any configured rail or address is not ready (missing, down, in DAD), change nothing and exit 1 (default: apply the rest and exit 5)'
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l not-ready-ok -d 'Exit 0, not 5, when parts of the config are not ready (they are still reported, and `watch` heals them once ready): for a caller that takes only 0 for success and has no shell to test the code, such as a Kubernetes init container'
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -l no-announce -d 'Do not announce the addresses of the changed rails to the peers afterwards (as `[defaults] announce = 0`)'
complete -c roce-route -n "__fish_roce_route_using_subcommand apply" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c roce-route -n "__fish_roce_route_using_subcommand rollback" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand rollback" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand rollback" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand rollback" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand rollback" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand rollback" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand rollback" -l dry-run -d 'Print the commands the rollback would run and change nothing'
complete -c roce-route -n "__fish_roce_route_using_subcommand rollback" -s h -l help -d 'Print help'
complete -c roce-route -n "__fish_roce_route_using_subcommand remove" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand remove" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand remove" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand remove" -l protocol -d 'Also take out routes and rules with this protocol number (this run only, never recorded); 5..=255, not a daemon\'s' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand remove" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand remove" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand remove" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand remove" -l dry-run -d 'Print the commands the removal would run and change nothing'
complete -c roce-route -n "__fish_roce_route_using_subcommand remove" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c roce-route -n "__fish_roce_route_using_subcommand check" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand check" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand check" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand check" -l format -d 'text (the differences in words) or prometheus (the metrics families `watch --metrics` writes, for this one check); --json prints the report as JSON' -r -f -a "text\t'The differences in plain words, each with its fix'
prometheus\t'The Prometheus text format (as node_exporter\'s textfile collector reads it)'"
complete -c roce-route -n "__fish_roce_route_using_subcommand check" -l sysfs-root -d 'Read the RDMA devices (`class/infiniband`) and netdev facts (`class/net`) from this copy of sysfs instead of /sys. Netdevs and addresses still come from the network namespace over rtnetlink' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand check" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand check" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand check" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c roce-route -n "__fish_roce_route_using_subcommand show" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand show" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand show" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand show" -l protocol -d 'Also take routes and rules with this protocol number as roce-route\'s (besides 234 and the ones it recorded); 5..=255, not a daemon\'s' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand show" -l sysfs-root -d 'Read the RDMA devices (`class/infiniband`) and netdev facts (`class/net`) from this copy of sysfs instead of /sys. Netdevs and addresses still come from the network namespace over rtnetlink' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand show" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand show" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand show" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand show" -s h -l help -d 'Print help'
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm" -s h -l help -d 'Print help'
complete -c roce-route -n "__fish_roce_route_using_subcommand announce" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand announce" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand announce" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand announce" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand announce" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand announce" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand announce" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -l resync -d 'A full pass this often even without a notification (0: never): sysctl writes send none, so this is how a reset arp_ignore or rp_filter is found. A pass that finds nothing to do only reads' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -l metrics -d 'Keep the metrics in FILE (Prometheus text format, replaced atomically at start and after every pass), e.g. for node_exporter\'s textfile collector' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -l sysfs-root -d 'Read the RDMA devices (`class/infiniband`) and netdev facts (`class/net`) from this copy of sysfs instead of /sys. Netdevs and addresses still come from the network namespace over rtnetlink' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c roce-route -n "__fish_roce_route_using_subcommand nccl-env" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand nccl-env" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand nccl-env" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand nccl-env" -l format -d 'shell (`export` lines) or nccl-conf (`/etc/nccl.conf` lines); --json prints the settings with the reasoning' -r -f -a "shell\t'`export NAME=VALUE` lines, the notes as comments'
nccl-conf\t'`NAME=VALUE` lines for /etc/nccl.conf (or ~/.nccl.conf)'"
complete -c roce-route -n "__fish_roce_route_using_subcommand nccl-env" -l sysfs-root -d 'Read the RDMA devices (`class/infiniband`) and netdev facts (`class/net`) from this copy of sysfs instead of /sys. Netdevs and addresses still come from the network namespace over rtnetlink' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand nccl-env" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand nccl-env" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand nccl-env" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand nccl-env" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l peer -d 'A peer address to probe: repeat it (`--peer A --peer B`) or give several at once, comma-separated (`--peer A,B`). One address per word, so CONFIG may follow it' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l peers -d 'A file of peer addresses (one a line, `#` comments) or the JSON that `roce-route probe --self --json` printed on the peer host (the verdicts then name the peer\'s NICs)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l timeout -d 'How long to wait for what does not answer (an answer ends the wait)' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l rdma-port -d 'The port of the responder (RDMA CM, TCP port space)' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l rdma-timeout -d 'How long one pair may take at the RDMA layer before it is a failure (rxe retries forever; a NIC gives up after its retries)' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l idle -d 'With --listen: end after this many seconds without a new connection' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l sysfs-root -d 'Read the RDMA devices (`class/infiniband`) and netdev facts (`class/net`) from this copy of sysfs instead of /sys. Netdevs and addresses still come from the network namespace over rtnetlink' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l self -d 'Describe this host\'s rails (name, addresses, MAC, MTU, RDMA port) for a peer\'s --peers, and probe nothing'
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l same-rail -d 'Probe each peer address only from the rail named as the peer\'s NIC that has it (known from --peers documents; an address none describes is probed from every rail). A fleet probing at once then makes each host learn rails, not rails x rails, neighbour entries per prober: 504 instead of 4,032 at 64 hosts of 8 rails, against a default gc_thresh3 of 1024'
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l rdma -d 'Also probe each pair at the RDMA layer, against `roce-route probe --listen` on the peer: RDMA CM from the rail\'s own address and device, a connection, an RDMA WRITE and READ of a tag, a READ of 8 KiB. Needs librdmacm and libibverbs at run time; the static binary cannot load them and reports every pair not verified'
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -l listen -d 'Be the responder of the peers\' `--rdma`: listen on every rail address of CONFIG until --idle seconds pass without a connection (or a signal). Probes nothing, changes nothing'
complete -c roce-route -n "__fish_roce_route_using_subcommand probe" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c roce-route -n "__fish_roce_route_using_subcommand completions" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand completions" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand completions" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand completions" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand completions" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand completions" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c roce-route -n "__fish_roce_route_using_subcommand man" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand man" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand man" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand man" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand man" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand man" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand man" -s h -l help -d 'Print help'
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -l netns -d 'Run inside this named network namespace (as `ip -n NAME`); every `ip` and `sysctl` command printed then acts there too' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -l state-dir -d 'Where journals and the record of earlier runs live (one subdirectory per network namespace)' -r -F
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -l lock-timeout -d 'How long to wait for another roce-route working in the same network namespace before giving up' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -l seconds -r
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -l after -d 'The newest journal\'s sequence number before the change (0: none): the trial is every journal after it' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -l trial -d 'The trial id its journals carry' -r
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -l apply-pid -r
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -l json -d 'Print one JSON document on stdout: {"command", "ok", "exit_code", "changed", "warnings", "error", ...the command\'s own fields}'
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -s v -l verbose -d 'apply: list every command it ran and every address it announced (default: a summary per interface and one line for the announcements); watch: log every pass, not only the heals'
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -s q -l quiet -d 'Print nothing but errors (the exit code tells the rest)'
complete -c roce-route -n "__fish_roce_route_using_subcommand confirm-guard" -s h -l help -d 'Print help'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "discover" -d 'Print a config for this host\'s RDMA NICs'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "apply" -d 'Make the host\'s tables, rules and ARP sysctls match CONFIG'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "rollback" -d 'Undo the most recent apply (or remove) exactly'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "remove" -d 'Take out every route and rule roce-route owns; restore the sysctls'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "check" -d 'Exit 0 when the host is as CONFIG asks (state and traffic), 3 when not'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "show" -d 'Show what roce-route owns now, by interface, and where traffic goes'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "confirm" -d 'Keep the change of a waiting `apply --confirm`'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "announce" -d 'Announce every address of CONFIG to the peers now, each from its own rail'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "watch" -d 'Keep the host as the latest apply left it: heal what others take away'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "nccl-env" -d 'Print NCCL\'s settings for the rails of CONFIG (or of the latest apply)'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "probe" -d 'Probe the rails on the wire against their peers; a verdict per pair'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "completions" -d 'Print a shell completion script (bash, zsh, fish, ...) on stdout'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "man" -d 'Print a manual page (roff) on stdout: `roce-route man | man -l -`'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "confirm-guard" -d '(internal) The guard `apply --confirm` starts: reverts the change at the deadline unless it is confirmed'
complete -c roce-route -n "__fish_roce_route_using_subcommand help; and not __fish_seen_subcommand_from discover apply rollback remove check show confirm announce watch nccl-env probe completions man confirm-guard help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
