// Blob bytes in an S3-compatible bucket (AWS, R2, MinIO, ...): an upload streams to `tmp/<key>`
// in parts while it is hashed, is copied to `blocks/<cid>` once its CID is known, and the
// temporary object is removed on discard. Several hosts can share one bucket. Every request has a
// deadline: a bucket that stops answering fails the call with 504 UpstreamTimeout, one that refuses
// or errs with 502 UpstreamFailure (an upload turns that into 503), instead of holding the caller's
// request open.
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3'
import { xrpcError } from '../errors.js'
import { UploadMeter, type BlobStore, type StagedBlob } from './blobstore.js'
import { s3RequestHandler } from '../net/dns.js'
import type { S3Config } from '../config.js'

// S3's smallest part but the last; an upload under one part is a single PutObject
const PART_BYTES = 8 * 1024 * 1024

function missing(err: unknown) {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } }
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404
}

/** the bucket's trouble as the XRPC error a caller sees; a 404 stays as it is (the callers ask for it) */
function upstreamError(err: unknown, timedOut: boolean): unknown {
  if (timedOut) return xrpcError('UpstreamTimeout', 'The blob store did not answer in time', undefined, err)
  if (missing(err)) return err
  return xrpcError('UpstreamFailure', 'The blob store failed or could not be reached', undefined, err)
}

export class S3BlobStore implements BlobStore {
  private client: S3Client
  private bucket: string

  constructor(private cfg: S3Config) {
    this.bucket = cfg.bucket
    this.client = new S3Client({
      region: cfg.region,
      endpoint: cfg.endpoint,
      forcePathStyle: cfg.forcePathStyle,
      requestHandler: s3RequestHandler(cfg.nameservers),
      credentials:
        cfg.accessKeyId && cfg.secretAccessKey ? { accessKeyId: cfg.accessKeyId, secretAccessKey: cfg.secretAccessKey } : undefined,
    })
  }

  private key(cid: string) {
    // CIDs are base32 lowercase; refuse anything else before it becomes part of a key
    if (!/^[a-z2-7]+$/.test(cid)) throw xrpcError('InvalidRequest', 'Invalid blob CID')
    return `blocks/${cid}`
  }

  /** runs one request, abandoned after `ms` without an answer (a body already answering keeps streaming) */
  private async send<T>(request: (opts: { abortSignal: AbortSignal }) => Promise<T>, ms = this.cfg.requestTimeoutMs): Promise<T> {
    const abort = new AbortController()
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      abort.abort()
    }, ms)
    try {
      return await request({ abortSignal: abort.signal })
    } catch (err) {
      throw upstreamError(err, timedOut)
    } finally {
      clearTimeout(timer)
    }
  }

  async stage(input: AsyncIterable<Uint8Array>, limit: number): Promise<StagedBlob> {
    const key = randomBytes(16).toString('hex')
    const Key = `tmp/${key}`
    const Bucket = this.bucket
    const meter = new UploadMeter(limit)
    const upload = this.cfg.uploadTimeoutMs
    let pending: Uint8Array[] = []
    let pendingBytes = 0
    let uploadId: string | undefined
    const parts: { ETag?: string; PartNumber: number }[] = []
    const sendPart = async () => {
      const Body = Buffer.concat(pending, pendingBytes)
      pending = []
      pendingBytes = 0
      uploadId ??= (await this.send((opts) => this.client.send(new CreateMultipartUploadCommand({ Bucket, Key }), opts), upload)).UploadId!
      const PartNumber = parts.length + 1
      const res = await this.send(
        (opts) =>
          this.client.send(new UploadPartCommand({ Bucket, Key, UploadId: uploadId, PartNumber, Body, ContentLength: Body.length }), opts),
        upload,
      )
      parts.push({ ETag: res.ETag, PartNumber })
    }
    try {
      for await (const chunk of input) {
        meter.take(chunk)
        pending.push(chunk)
        pendingBytes += chunk.length
        if (pendingBytes >= PART_BYTES) await sendPart()
      }
      if (uploadId === undefined) {
        const Body = Buffer.concat(pending, pendingBytes)
        await this.send((opts) => this.client.send(new PutObjectCommand({ Bucket, Key, Body, ContentLength: Body.length }), opts), upload)
      } else {
        if (pendingBytes > 0) await sendPart()
        await this.send(
          (opts) =>
            this.client.send(
              new CompleteMultipartUploadCommand({ Bucket, Key, UploadId: uploadId, MultipartUpload: { Parts: parts } }),
              opts,
            ),
          upload,
        )
      }
    } catch (err) {
      if (uploadId !== undefined) {
        await this.send((opts) => this.client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId: uploadId }), opts)).catch(
          () => {},
        )
      }
      throw err
    }
    return { key, ...meter.result() }
  }

  async commit(staged: StagedBlob): Promise<void> {
    // same bytes under the same key: copying over an existing object is harmless
    await this.send(
      (opts) =>
        this.client.send(
          new CopyObjectCommand({ Bucket: this.bucket, CopySource: `${this.bucket}/tmp/${staged.key}`, Key: this.key(staged.cid) }),
          opts,
        ),
      this.cfg.uploadTimeoutMs,
    )
  }

  async discard(staged: StagedBlob): Promise<void> {
    await this.send((opts) => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: `tmp/${staged.key}` }), opts))
  }

  async has(cid: string): Promise<boolean> {
    try {
      await this.send((opts) => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.key(cid) }), opts))
      return true
    } catch (err) {
      if (missing(err)) return false
      throw err
    }
  }

  async read(cid: string) {
    try {
      const res = await this.send((opts) => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.key(cid) }), opts))
      const body = res.Body as Readable | undefined
      if (!body) return null
      return { stream: body instanceof Readable ? body : Readable.from(body as AsyncIterable<Uint8Array>), size: Number(res.ContentLength) }
    } catch (err) {
      if (missing(err)) return null
      throw err
    }
  }

  async delete(cid: string): Promise<void> {
    await this.send((opts) => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(cid) }), opts))
  }

  async sweepStaged(before: Date): Promise<number> {
    let removed = 0
    let ContinuationToken: string | undefined
    do {
      const page = await this.send((opts) =>
        this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: 'tmp/', ContinuationToken }), opts),
      )
      for (const o of page.Contents ?? []) {
        if (!o.Key || !o.LastModified || o.LastModified >= before) continue
        await this.send((opts) => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: o.Key }), opts))
        removed++
      }
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (ContinuationToken)
    // parts of uploads a crash left unfinished are billed too (a server without this listing has none to list)
    const uploads = await this.send((opts) =>
      this.client.send(new ListMultipartUploadsCommand({ Bucket: this.bucket, Prefix: 'tmp/' }), opts),
    ).catch(() => null)
    for (const u of uploads?.Uploads ?? []) {
      if (!u.Key || !u.UploadId || !u.Initiated || u.Initiated >= before) continue
      await this.send((opts) =>
        this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: u.Key, UploadId: u.UploadId }), opts),
      )
      removed++
    }
    return removed
  }

  destroy() {
    this.client.destroy()
  }
}
