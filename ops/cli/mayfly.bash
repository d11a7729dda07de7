# mayfly.bash - bash completion for mayfly, the command line client.
#
# Installed as /usr/share/bash-completion/completions/mayfly (make install:
# $(PREFIX)/share/bash-completion/completions), where bash-completion finds
# it the first time "mayfly" is completed; or source it from ~/.bashrc.
#
# Completes the subcommands, the options (the global ones anywhere, a
# subcommand's after it), the values of options that take a fixed set
# (--scope node|cluster, --status completed|failed|retry), and configure's
# KEY= names and policy's values, and bench's modes.  The subcommands and
# their options are read from the client's own --help ("mayfly --help",
# "mayfly CMD --help": no node is asked), so they follow the binary being
# completed; only the configure keys and bench's modes are listed here
# (SPEC §4).  Queue names, payloads and ids are not completed.  Needs
# bash 4; bash-completion itself is not needed.

# shellcheck disable=SC2207 # the words compgen prints are one a line

# _mayfly_opts BIN [CMD] - the options BIN's usage lists, one a line:
# "--name", "--name VALUE" (takes a value) or "--name a|b" (one of those).
_mayfly_opts()
{
    "$1" ${2:+"$2"} --help 2>/dev/null |
        grep -oE -- '--[a-z][a-z-]*( [A-Z]+|( [a-z]+(\|[a-z]+)+))?' |
        sort -u
}

# _mayfly_values SPEC... NAME - the value list of option NAME among the
# SPECs _mayfly_opts gave ("" if it takes a free value, or none; returns 1
# when NAME is a flag or unknown).
_mayfly_values()
{
    local name=${!#} spec
    for spec in "${@:1:$#-1}"; do
        case $spec in
        "$name") return 1 ;;
        "$name "[[:upper:]]*) REPLY= ; return 0 ;;
        "$name "*) REPLY=${spec#* }; REPLY=${REPLY//|/ }; return 0 ;;
        esac
    done
    return 1
}

_mayfly()
{
    local -a words specs
    local cur prev bin cmd= cword i operands=0 line

    # The words as the user typed them, split at blanks only: bash splits
    # COMP_WORDS at '=' and ':' too, which cuts --url=http://... apart.
    if [[ -n ${COMP_LINE-} ]]; then
        line=${COMP_LINE:0:${COMP_POINT:-${#COMP_LINE}}}
        read -ra words <<<"$line"
        [[ $line == *[[:space:]] || ${#words[@]} -eq 0 ]] && words+=("")
        cword=$((${#words[@]} - 1))
    else
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    cur=${words[cword]}
    prev=
    ((cword > 0)) && prev=${words[cword - 1]}
    bin=${words[0]}
    [[ $bin == "~/"* ]] && bin=$HOME/${bin#"~/"}
    COMPREPLY=()

    # The subcommand: the first word that is no option nor an option's
    # value; after it, count the operands (QUEUE first).
    mapfile -t specs < <(_mayfly_opts "$bin")
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        --*=*) ;;
        -*) _mayfly_values "${specs[@]}" "${words[i]}" && ((i++)) ;;
        *)
            if [[ -z $cmd ]]; then
                cmd=${words[i]}
                mapfile -t -O ${#specs[@]} specs < <(_mayfly_opts "$bin" "$cmd")
            else
                ((operands++))
            fi
            ;;
        esac
    done

    # The value of an option: from its list, or nothing to offer.
    if [[ $prev == --* && $prev != *=* ]] &&
        _mayfly_values "${specs[@]}" "$prev"; then
        [[ -n $REPLY ]] && COMPREPLY=($(compgen -W "$REPLY" -- "$cur"))
        return 0
    fi
    if [[ $cur == --*=* ]]; then
        _mayfly_values "${specs[@]}" "${cur%%=*}" && [[ -n $REPLY ]] &&
            COMPREPLY=($(compgen -W "$REPLY" -- "${cur#*=}"))
        return 0
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(printf '%s\n' "${specs[@]%% *}" --help |
            sort -u)" -- "$cur"))
        return 0
    fi
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$("$bin" --help 2>/dev/null |
            awk '/^  [a-z]+  / { print $1 }')" -- "$cur"))
        return 0
    fi
    # bench MODE: what it can measure.
    if [[ $cmd == bench && $operands -eq 0 ]]; then
        COMPREPLY=($(compgen -W "push pop request stream" -- "$cur"))
        return 0
    fi
    # configure QUEUE KEY=VALUE...: the options of SPEC §4.
    if [[ $cmd == configure && $operands -ge 1 ]]; then
        case $cur in
        policy=*)
            COMPREPLY=($(compgen -W "reject dropOldest" -- "${cur#policy=}"))
            ;;
        *=*) ;;
        *)
            COMPREPLY=($(compgen -W "maxLength= maxBytes= policy=
                windowBuffer.ms= windowBuffer.count= ttlSeconds=
                leaseSeconds= retryLimit= dedupeSeconds= retryDelayMs=
                deadLetter= deadLetterExpired= conflate=" \
                -- "$cur"))
            # the value comes right after the '='
            [[ ${#COMPREPLY[@]} -gt 0 ]] && compopt -o nospace 2>/dev/null
            ;;
        esac
    fi
    return 0
}

complete -F _mayfly mayfly
