# Sourced by .ci/mpi.sh, ofi.sh and ucx.sh: the Cargo features their command-line tests build
# with. .ci/run gives the three scripts the same list (CI_FEATURES), so that they share one build.

# with_feature LIST NAME: the comma-separated LIST with NAME added when it lacks it.
with_feature() {
    case ",$1," in
        *,"$2",*) echo "$1" ;;
        *) echo "$2,$1" ;;
    esac
}
