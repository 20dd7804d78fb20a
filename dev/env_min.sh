# device: the carried wheels (.whl: numpy 2.3.5 at least; dev/make_carry.sh) into /tmp/site; the image has torch,
# cuda-core. .carry/dev_env.sh sources this and puts nbgrader's programs on PATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/tmp/pip.log 2>&1 || { tail -5 /tmp/pip.log; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__, torch.cuda.get_device_name())"
