# -- fabrikit: common %test checks (containers/common/test-common.sh) --
python3 -c 'import torch; print("torch", torch.__version__)'
test -d /opt/fabrikit/hostlib
# -- end of common %test checks --
