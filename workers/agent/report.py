"""Getting readings to the portal: a bounded buffer that survives a portal that is down (when
full it drops the oldest and counts them) and a reporter that posts them in batches with the
node's credential."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import deque

import urllib3

from workers.agent.reading import NodeReading

log = logging.getLogger(__name__)


class ReadingBuffer:
    """Readings waiting to be sent, oldest first, at most `capacity` of them."""

    def __init__(self, capacity: int = 720):  # an hour at a 5-second interval
        self.readings: deque[dict] = deque()
        self.capacity = capacity
        self.dropped = 0

    def add(self, reading: NodeReading) -> None:
        if len(self.readings) >= self.capacity:
            self.readings.popleft()
            self.dropped += 1
        self.readings.append(dataclasses.asdict(reading))

    def batch(self, size: int) -> list[dict]:
        return list(self.readings)[:size]

    def sent(self, count: int) -> None:
        for _ in range(min(count, len(self.readings))):
            self.readings.popleft()


class Reporter:
    """POSTs batches to the portal's telemetry endpoint; a failure keeps them for the next try."""

    def __init__(self, portal_url: str, token: str, *, timeout: float = 10.0, batch_size: int = 60):
        self.url = f"{portal_url.rstrip('/')}/api/v1/telemetry/readings"
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.timeout = timeout
        self.batch_size = batch_size
        self.http = urllib3.PoolManager(retries=False)

    def flush(self, buffer: ReadingBuffer) -> int:
        """Send what the buffer holds, a batch at a time; how many readings went."""
        sent = 0
        while buffer.readings:
            batch = buffer.batch(self.batch_size)
            body = json.dumps({"readings": batch, "dropped": buffer.dropped}).encode()
            try:
                answer = self.http.request(
                    "POST",
                    self.url,
                    body=body,
                    headers=self.headers,
                    timeout=urllib3.Timeout(total=self.timeout),
                )
            except urllib3.exceptions.HTTPError as error:
                log.warning("portal unreachable (%s); %d readings wait", error, len(buffer.readings))
                break
            if answer.status >= 300:
                log.warning("portal answered %s: %s", answer.status, answer.data[:300])
                break
            buffer.sent(len(batch))
            buffer.dropped = 0  # the portal has been told
            sent += len(batch)
        return sent
