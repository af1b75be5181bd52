// s3rver ships no types; the test describes the little it uses at the import.
declare module 's3rver'
