// The blob store the configuration selects: an S3 bucket when PDS_BLOBSTORE_S3_BUCKET is set, the
// disk otherwise. The bucket is the operator's own, so its client skips the outbound-request guard.
// The AWS SDK loads only when a bucket is configured: it would add megabytes to every idle server.
import type { Config } from '../config.js'
import { DiskBlobStore, type BlobStore } from './blobstore.js'

/** `probe`: first write, read back and delete an object, so a missing bucket or refused credentials stop the start */
export async function openBlobStore(config: Pick<Config, 'blobDir' | 'blobS3'>, opts: { probe?: boolean } = {}): Promise<BlobStore> {
  if (!config.blobS3) return new DiskBlobStore(config.blobDir)
  if (opts.probe) await (await import('./s3-probe.js')).probeBucket(config.blobS3)
  const { S3BlobStore } = await import('./blobstore-s3.js')
  return new S3BlobStore(config.blobS3)
}
