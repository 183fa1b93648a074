# The app image for compose.yaml: the web process and the workers run the same image.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir '/app[redis]'
EXPOSE 8000
CMD ["uvicorn", "--timeout-keep-alive", "75", "--host", "0.0.0.0", "--port", "8000", "evalproject.asgi:application"]
