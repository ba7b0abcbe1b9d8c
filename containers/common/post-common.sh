# -- fabrikit: common %post steps (containers/common/post-common.sh) --
# Record the image's glibc as a label: host libraries bound in at run time (libfabric,
# libcxi, ...) must not need a newer glibc than the image has (fabric-facts.md, failure 4).
# `fabrikit doctor` compares this label with the host's glibc.
fabrikit_glibc=$(ldd --version 2>/dev/null | head -n1 | awk '{print $NF}')
case "$fabrikit_glibc" in
    [0-9]*.[0-9]*) ;;
    *) fabrikit_glibc=unknown ;;
esac
echo "org.fabrikit.glibc $fabrikit_glibc" >> "${APPTAINER_LABELS:-$SINGULARITY_LABELS}"
unset fabrikit_glibc
# Destination of the host libraries named in a profile's host_libraries (target_dir).
mkdir -p /opt/fabrikit/hostlib
# -- end of common %post steps --
