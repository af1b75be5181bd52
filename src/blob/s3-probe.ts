// A round trip through an S3 bucket: write a small object, read it back, delete it. What the
// server does at start and `pds doctor` reports: a bucket that exists but refuses writes, or
// credentials that may list but not write, fail here rather than at the first upload.
import { randomBytes } from 'node:crypto'
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import type { BucketConfig } from '../config.js'

const TIMEOUT_MS = 10_000

export async function probeBucket(cfg: BucketConfig): Promise<void> {
  const client = new S3Client({
    region: cfg.region,
    endpoint: cfg.endpoint,
    forcePathStyle: cfg.forcePathStyle,
    credentials:
      cfg.accessKeyId && cfg.secretAccessKey ? { accessKeyId: cfg.accessKeyId, secretAccessKey: cfg.secretAccessKey } : undefined,
    // a missing bucket or a refusal is an answer, not something to retry
    maxAttempts: 1,
  })
  const Key = `tmp/pds-probe-${randomBytes(8).toString('hex')}`
  const body = randomBytes(16).toString('hex')
  const t = () => ({ abortSignal: AbortSignal.timeout(TIMEOUT_MS) })
  try {
    await client.send(new PutObjectCommand({ Bucket: cfg.bucket, Key, Body: body }), t())
    try {
      const got = await client.send(new GetObjectCommand({ Bucket: cfg.bucket, Key }), t())
      const text = await got.Body?.transformToString()
      if (text !== body) throw Object.assign(new Error('the object read back differs from the one written'), { name: 'ProbeMismatch' })
    } finally {
      await client.send(new DeleteObjectCommand({ Bucket: cfg.bucket, Key }), t())
    }
  } finally {
    client.destroy()
  }
}
